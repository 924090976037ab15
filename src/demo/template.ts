/**
 * The demonstration template (withdraw -> observe deposit -> sweep on the simulation lane), so that
 * a new user can create, approve and watch a movement right after `npm start`. It is installed once:
 * on a start with the embedded database, or with FERRY_DEMO_TEMPLATE=true; FERRY_DEMO_TEMPLATE=false
 * never installs it. Once the key exists Ferry leaves it alone, whatever versions an operator adds.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { FerryConfig } from '../config.ts';
import { lanes, type LaneList } from '../executors/lanes.ts';
import { log as rootLog, type Logger } from '../log.ts';
import { installSystemTemplate } from '../services/template-proposals.ts';
import type { Pool } from '../persistence/db.ts';
import { getTemplate } from '../persistence/templates.ts';
import { parseTemplateDefinition, type TemplateDefinition } from '../plan/template-schema.ts';

export const DEMO_TEMPLATE_KEY = 'demo.withdraw-sweep';
/** Recorded as the template's author. */
export const DEMO_AUTHOR = 'system:demo';

/** The definition, from the YAML file next to this module (also usable with `ferry templates apply`). */
export function demoTemplate(): TemplateDefinition {
  return parseTemplateDefinition(parse(readFileSync(new URL('./withdraw-sweep.yaml', import.meta.url), 'utf8')));
}

/** Wanted (FERRY_DEMO_TEMPLATE, else with the embedded database) and shipped by a lane of the list (the simulation lane's templates). */
export function demoTemplateWanted(config: Pick<FerryConfig, 'demoTemplate'>, database: 'embedded' | 'external', list: LaneList = lanes): boolean {
  if (!list.some((l) => l.templates.some((t) => t.key === DEMO_TEMPLATE_KEY))) return false;
  return config.demoTemplate ?? database === 'embedded';
}

/** Installs the demo template unless its key exists. Several processes may start at once. */
export async function installDemoTemplate(pool: Pool): Promise<'installed' | 'present'> {
  if (await getTemplate(pool, DEMO_TEMPLATE_KEY)) return 'present';
  // A system proposal finalized at once (audited as such). Concurrent installers queue on the
  // template key inside installSystemTemplate; the same graph gives one version.
  const { outcome } = await installSystemTemplate({ pool, config: SYSTEM_WINDOWS }, demoTemplate(), DEMO_AUTHOR);
  return outcome;
}

/** A system install has no review: it is finalized in the transaction that proposes it. */
const SYSTEM_WINDOWS = { templateReviewWindowSeconds: 0, templateChallengeWindowSeconds: 0 };

/**
 * The start-up step: installs the demo template when wanted and says how to use it. A failure is
 * logged and start-up goes on; a demo must never keep Ferry from starting.
 */
export async function setUpDemo(
  runtime: { pool: Pool; config: Pick<FerryConfig, 'demoTemplate'>; database: 'embedded' | 'external' },
  log: Logger = rootLog,
): Promise<void> {
  if (!demoTemplateWanted(runtime.config, runtime.database)) return;
  try {
    if ((await installDemoTemplate(runtime.pool)) === 'installed') {
      log.info(
        { template_key: DEMO_TEMPLATE_KEY },
        `demo template ${DEMO_TEMPLATE_KEY} installed; see docs/visualizer.md to run and watch a movement in /ui`,
      );
    }
  } catch (err) {
    log.warn({ err, template_key: DEMO_TEMPLATE_KEY }, 'could not install the demo template');
  }
}
