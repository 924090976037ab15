import { newWebhookSecret } from '../callbacks/signing.ts';
import type { FerryConfig } from '../config.ts';
import { FerryError, NotFoundError, ValidationError } from '../errors.ts';
import { isUuid } from '../ids.ts';
import { writeAudit } from '../persistence/audit.ts';
import {
  findDestination,
  insertDestination,
  insertSecret,
  listDestinations as listDestinationRows,
  markDestinationDisabled,
  retireSecrets,
  type DestinationRow,
} from '../persistence/callback-destinations.ts';
import { withTransaction, type Pool, type Queryable } from '../persistence/db.ts';
import { assertCallbackUrlAllowed } from '../callbacks/url-policy.ts';

/**
 * The callback destination service: the one place that creates, rotates and disables registered
 * destinations. Each write is one transaction with its audit event. A secret leaves this module only
 * in the answer of the call that made it (create, rotate); it is never in an audit event, a log line
 * or any later answer.
 */

export const DESTINATION_NAME_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
export const DEFAULT_OVERLAP_SECONDS = 86_400;
export const MAX_OVERLAP_SECONDS = 30 * 86_400;

export interface DestinationServiceDeps {
  pool: Pool;
  config: Pick<FerryConfig, 'callbackAllowedHosts'>;
}

export interface DestinationWithSecret {
  destination: DestinationRow;
  /** Shown once: Ferry signs with it but never shows it again. */
  secret: string;
}

/** A Standard Webhooks secret (whsec_ + base64 of 32 random bytes); destinations made before kept fcs_ ones. */
function newSecret(): string {
  return newWebhookSecret();
}

export function assertDestinationName(name: string): void {
  if (!DESTINATION_NAME_PATTERN.test(name) || isUuid(name)) {
    throw new ValidationError('name must be 1-63 lowercase letters, digits, "_", "." or "-", starting with a letter or digit, and not a UUID', {
      field: 'name',
    });
  }
}

export async function createDestination(
  deps: DestinationServiceDeps,
  input: { actor: string; name: string; url: string; nodeEvents?: boolean },
): Promise<DestinationWithSecret> {
  assertDestinationName(input.name);
  assertCallbackUrlAllowed(input.url, deps.config);
  const secret = newSecret();
  const destination = await withTransaction(deps.pool, async (client) => {
    const nodeEvents = input.nodeEvents ?? false;
    const inserted = await insertDestination(client, { name: input.name, url: input.url, createdBy: input.actor, nodeEvents });
    if (!inserted) {
      throw new FerryError('CALLBACK_DESTINATION_EXISTS', `a callback destination named ${input.name} already exists`, { name: input.name });
    }
    await insertSecret(client, { destinationId: inserted.id, secret, createdBy: input.actor });
    await auditDestination(client, input.actor, 'callback_destination.create', { id: inserted.id, name: input.name }, { node_events: nodeEvents });
    return (await findDestination(client, inserted.id))!;
  });
  return { destination, secret };
}

export async function listDestinations(db: Queryable): Promise<DestinationRow[]> {
  return listDestinationRows(db);
}

/** By id or name; NOT_FOUND otherwise. */
export async function showDestination(db: Queryable, ref: string): Promise<DestinationRow> {
  const found = await findDestination(db, ref);
  if (!found) throw new NotFoundError('callback destination', ref);
  return found;
}

/**
 * Makes a new current secret. The earlier ones keep signing for `overlapSeconds` (deliveries carry a
 * signature with each), then only the new one does. A disabled destination is not rotated.
 */
export async function rotateDestinationSecret(
  deps: DestinationServiceDeps,
  input: { actor: string; ref: string; overlapSeconds?: number },
): Promise<DestinationWithSecret & { previousSecretsExpireAt: Date }> {
  const overlapSeconds = input.overlapSeconds ?? DEFAULT_OVERLAP_SECONDS;
  if (!Number.isInteger(overlapSeconds) || overlapSeconds < 0 || overlapSeconds > MAX_OVERLAP_SECONDS) {
    throw new ValidationError(`overlap_seconds must be an integer from 0 to ${MAX_OVERLAP_SECONDS}`, { field: 'overlap_seconds' });
  }
  const secret = newSecret();
  return withTransaction(deps.pool, async (client) => {
    // The row lock orders concurrent rotations (and a concurrent disable) of one destination.
    const locked = await lockDestination(client, input.ref);
    if (locked.status !== 'active') throw disabledError(locked);
    const previousSecretsExpireAt = await retireSecrets(client, locked.id, overlapSeconds);
    await insertSecret(client, { destinationId: locked.id, secret, createdBy: input.actor });
    await auditDestination(client, input.actor, 'callback_destination.rotate_secret', locked, {
      overlap_seconds: overlapSeconds,
      previous_secrets_expire_at: previousSecretsExpireAt.toISOString(),
    });
    return { destination: (await findDestination(client, locked.id))!, secret, previousSecretsExpireAt };
  });
}

/**
 * Stops deliveries to the destination: from now on each of its callbacks goes to the dead-letter
 * queue at its next attempt (last_error destination_disabled) without being sent, and movements can
 * no longer name it. Disabling a disabled destination changes nothing and writes no audit event.
 */
export async function disableDestination(deps: DestinationServiceDeps, input: { actor: string; ref: string }): Promise<DestinationRow> {
  return withTransaction(deps.pool, async (client) => {
    const locked = await lockDestination(client, input.ref);
    if (locked.status === 'disabled') return locked;
    await markDestinationDisabled(client, locked.id, input.actor);
    await auditDestination(client, input.actor, 'callback_destination.disable', locked);
    return (await findDestination(client, locked.id))!;
  });
}

/** By id or name, locked for update (it orders concurrent changes of one destination); NOT_FOUND otherwise. */
async function lockDestination(client: Queryable, ref: string): Promise<DestinationRow> {
  const locked = await findDestination(client, ref, { lock: 'update' });
  if (!locked) throw new NotFoundError('callback destination', ref);
  return locked;
}

/** The change's audit event, in its transaction: the destination's name and what else the change says. */
function auditDestination(client: Queryable, actor: string, action: string, d: { id: string; name: string }, details: Record<string, unknown> = {}): Promise<number> {
  return writeAudit(client, { actor, action, entity_type: 'callback_destination', entity_id: d.id, details: { name: d.name, ...details } });
}

function disabledError(d: DestinationRow): FerryError {
  return new FerryError('CALLBACK_DESTINATION_DISABLED', `callback destination ${d.name} is disabled`, { id: d.id, name: d.name });
}

/**
 * For the movement service, inside its transaction: the active destination a new movement names,
 * held with a share lock so a concurrent disable waits for the movement to commit.
 */
export async function destinationForMovement(client: Queryable, ref: string): Promise<DestinationRow> {
  const found = await findDestination(client, ref, { lock: 'share' });
  if (!found) {
    throw new FerryError('CALLBACK_DESTINATION_UNKNOWN', `no callback destination is named ${ref}`, { field: 'callback_destination', callback_destination: ref });
  }
  if (found.status !== 'active') throw disabledError(found);
  return found;
}
