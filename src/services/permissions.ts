import { roles, type Role } from '../persistence/tokens.ts';

/**
 * Who may do what: the whole access policy, as one matrix of roles and permissions. Every /v3 route
 * names the one permission it needs (src/http/auth.ts checks it); the movement queue's consumer
 * checks the same matrix for the token a queued movement names. Reviewing access means reading this.
 */

export const permissions = [
  'read',
  'movement.create',
  /** approve and reject */
  'movement.approve',
  'movement.cancel',
  /** resume and retry */
  'movement.operate',
  'template.write',
  'callback.redrive',
  /** register, list, show, rotate and disable callback destinations (their URLs are operator data) */
  'callback.destination',
  'signer.identity',
  'dashboard',
  'token.admin',
  /** approve a template proposal (never one's own) */
  'template.approve',
  /** challenge an approved template proposal within its challenge window */
  'template.challenge',
  /** change jobs, queues and schedules through the dashboard (admin only: nobody else holds it) */
  'dashboard.jobs',
  /** list, create, change and delete the operator channels notifications go to (admin only: their URLs and secrets reach outside) */
  'notify.channel',
  /** propose and withdraw changes of the address book and the rule set (docs/policy.md) */
  'policy.write',
  /** approve, reject or challenge a policy proposal (never one's own approval) */
  'policy.approve',
] as const;
export type Permission = (typeof permissions)[number];

// Separation of duties: whoever requests a movement cannot approve it by role, and approvers cannot
// create or steer movements. Admin holds everything except approving: approval is its own grant, held
// only by the approver role, so a principal who administers Ferry approves only with an approver token
// it was given explicitly (and audited), and never its own movements (four-eyes counts principals).
const grants: Record<Role, readonly Permission[]> = {
  viewer: ['read'],
  requester: ['read', 'movement.create', 'movement.cancel'],
  approver: ['read', 'movement.approve', 'template.approve', 'template.challenge', 'policy.approve'],
  operator: ['read', 'movement.cancel', 'movement.operate', 'callback.redrive', 'template.write', 'dashboard', 'callback.destination', 'policy.write'],
  admin: permissions.filter((p) => p !== 'movement.approve'),
};

export function can(role: Role, permission: Permission): boolean {
  return grants[role]?.includes(permission) ?? false;
}

/**
 * Whether a token of this role can decide for others: approve a movement or a template proposal, or
 * administer who may act. Through the API, such a token is issued only by two admins (one proposes,
 * another confirms: src/services/credential-proposals.ts), even to oneself.
 */
export function roleDecides(role: Role): boolean {
  return can(role, 'movement.approve') || can(role, 'template.approve') || can(role, 'policy.approve') || can(role, 'token.admin');
}

export { roles, type Role };
