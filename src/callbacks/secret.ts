import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FerryConfig } from '../config.ts';
import { newWebhookSecret } from './signing.ts';

export const CALLBACK_SECRET_FILE = 'callback-secret';
const MIN_SECRET_LENGTH = 16;

/**
 * The callback signing secret: FERRY_CALLBACK_SECRET when set; otherwise one generated on first
 * start and kept in the data folder (mode 0600), so receivers keep verifying across restarts. A
 * generated one is a Standard Webhooks secret (whsec_ + base64 of 32 bytes); a file from an earlier
 * version (64 hex characters) is kept as it is.
 */
export async function resolveCallbackSecret(
  config: Pick<FerryConfig, 'callbackSecret'>,
  dataDir: string,
): Promise<string> {
  if (config.callbackSecret) return config.callbackSecret;

  const path = join(dataDir, CALLBACK_SECRET_FILE);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  try {
    // 'wx' fails when the file exists, so processes starting together keep whichever secret won.
    await writeFile(path, `${newWebhookSecret()}\n`, { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  // A file copied in with a looser mode is tightened rather than trusted as is.
  await chmod(path, 0o600);
  const secret = (await readFile(path, 'utf8')).trim();
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new Error(`${path} holds no usable callback secret (at least ${MIN_SECRET_LENGTH} characters); remove it to generate a new one`);
  }
  return secret;
}
