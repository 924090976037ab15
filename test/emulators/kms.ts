import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { bytesToHex, hexToBytes, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, sign } from 'viem/accounts';
import { listenOnLoopback } from '../helpers/net.ts';

/**
 * A loopback AWS KMS for tests, speaking the real JSON 1.1 protocol for the two calls an EVM
 * signer makes, so the real @aws-sdk/client-kms talks to it unchanged:
 *   POST /  content-type application/x-amz-json-1.1, X-Amz-Target TrentService.GetPublicKey or
 *   TrentService.Sign, a SigV4 Authorization header (its presence, scheme and access key id are
 *   checked; the signature itself is not), base64 blobs in and out.
 * It holds secp256k1 keys and answers GetPublicKey with the key's SubjectPublicKeyInfo (DER) and
 * Sign (MessageType DIGEST) with a DER-encoded ECDSA signature over the 32 bytes as given.
 * Errors are real KMS error shapes: HTTP 400 with `{"__type": ..., "message": ...}`, 500 for an
 * internal failure. Faults are scripted per request.
 */

export type KmsFault =
  /** HTTP 400 ThrottlingException (the SDK retries it). */
  | 'throttle'
  /** HTTP 500 KMSInternalException (the SDK retries it). */
  | 'internal'
  /** HTTP 400 NotFoundException, whatever the key id. */
  | 'not_found'
  /** HTTP 400 DisabledException. */
  | 'disabled'
  /** A valid signature with s in the high half of the group order, as KMS may return. */
  | 'high_s'
  /** HTTP 403 ExpiredTokenException, AWS's common error for session credentials past their expiry. */
  | 'expired_token';

export interface KmsRequestLog {
  target: string;
  keyId: string | null;
  attempt: string | null;
}

export interface KmsEmulator {
  url: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** The id of the key the emulator made; its ARN works too. */
  keyId: string;
  keyArn: string;
  /** The key's EVM address, lowercase. */
  address: Hex;
  /** Every request, in order (refused ones included). */
  requests: KmsRequestLog[];
  /** The next requests get these faults, one each, in order. */
  script(...faults: KmsFault[]): void;
  /** Every request gets this fault until cleared with null. */
  always(fault: KmsFault | null): void;
  stop(): Promise<void>;
}

const SPKI_SECP256K1_PREFIX = '3056301006072a8648ce3d020106052b8104000a034200';
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

export async function startKmsEmulator(opts: { privateKey?: Hex; region?: string; accessKeyId?: string } = {}): Promise<KmsEmulator> {
  const privateKey = opts.privateKey ?? generatePrivateKey();
  const account = privateKeyToAccount(privateKey);
  const region = opts.region ?? 'eu-west-1';
  const accessKeyId = opts.accessKeyId ?? 'AKIAFERRYTEST0000001';
  const secretAccessKey = 'ferry-test-secret-' + bytesToHex(crypto.getRandomValues(new Uint8Array(8))).slice(2);
  const keyId = crypto.randomUUID();
  const keyArn = `arn:aws:kms:${region}:000000000000:key/${keyId}`;
  const spki = Buffer.from(SPKI_SECP256K1_PREFIX + account.publicKey.slice(2), 'hex');
  const queued: KmsFault[] = [];
  let standing: KmsFault | null = null;
  const requests: KmsRequestLog[] = [];

  const server = createServer((req, res) => {
    handle(req, res).catch(() => reply(res, 500, { __type: 'KMSInternalException', message: 'emulator error' }));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const target = String(req.headers['x-amz-target'] ?? '');
    let input: Record<string, unknown> = {};
    try {
      input = body.length ? (JSON.parse(body) as Record<string, unknown>) : {};
    } catch {
      return reply(res, 400, { __type: 'SerializationException', message: 'body is not JSON' });
    }
    requests.push({ target, keyId: typeof input.KeyId === 'string' ? input.KeyId : null, attempt: (req.headers['amz-sdk-request'] as string) ?? null });

    if (req.method !== 'POST' || req.url !== '/') return reply(res, 404, { __type: 'UnknownOperationException', message: 'POST / only' });
    if (!String(req.headers['content-type'] ?? '').startsWith('application/x-amz-json-1.1')) {
      return reply(res, 400, { __type: 'SerializationException', message: 'content-type must be application/x-amz-json-1.1' });
    }
    const auth = String(req.headers.authorization ?? '');
    const credential = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/\d{8}\/([^/]+)\/kms\/aws4_request, SignedHeaders=[^,]+, Signature=[0-9a-f]{64}$/.exec(auth);
    if (!credential || credential[1] !== accessKeyId) {
      return reply(res, 400, { __type: 'UnrecognizedClientException', message: 'The security token included in the request is invalid.' });
    }
    if (credential[2] !== region) return reply(res, 400, { __type: 'InvalidSignatureException', message: 'wrong region in the credential scope' });

    const fault = queued.shift() ?? standing;
    if (fault === 'throttle') return reply(res, 400, { __type: 'ThrottlingException', message: 'Rate exceeded' });
    if (fault === 'expired_token') return reply(res, 403, { __type: 'ExpiredTokenException', message: 'The security token included in the request is expired' });
    if (fault === 'internal') return reply(res, 500, { __type: 'KMSInternalException', message: 'internal failure' });
    if (fault === 'disabled') return reply(res, 400, { __type: 'DisabledException', message: `${keyArn} is disabled.` });
    const known = input.KeyId === keyId || input.KeyId === keyArn;
    if (fault === 'not_found' || !known) {
      return reply(res, 400, { __type: 'NotFoundException', message: `Key '${String(input.KeyId)}' does not exist` });
    }

    switch (target) {
      case 'TrentService.GetPublicKey':
        return reply(res, 200, {
          KeyId: keyArn,
          PublicKey: spki.toString('base64'),
          KeySpec: 'ECC_SECG_P256K1',
          CustomerMasterKeySpec: 'ECC_SECG_P256K1',
          KeyUsage: 'SIGN_VERIFY',
          SigningAlgorithms: ['ECDSA_SHA_256'],
        });
      case 'TrentService.Sign': {
        if (input.SigningAlgorithm !== 'ECDSA_SHA_256') {
          return reply(res, 400, { __type: 'InvalidKeyUsageException', message: 'the key supports ECDSA_SHA_256 only' });
        }
        if (input.MessageType !== 'DIGEST') return reply(res, 400, { __type: 'ValidationException', message: 'this emulator signs digests only' });
        const message = Buffer.from(String(input.Message ?? ''), 'base64');
        if (message.length !== 32) return reply(res, 400, { __type: 'ValidationException', message: 'a DIGEST message is 32 bytes' });
        const sig = await sign({ hash: bytesToHex(message), privateKey });
        let s = BigInt(sig.s);
        if (fault === 'high_s') s = N - s;
        return reply(res, 200, { KeyId: keyArn, Signature: derSignature(BigInt(sig.r), s).toString('base64'), SigningAlgorithm: 'ECDSA_SHA_256' });
      }
      default:
        return reply(res, 400, { __type: 'UnknownOperationException', message: `operation ${target} is not emulated` });
    }
  }

  const { url, stop } = await listenOnLoopback(server);
  return {
    url,
    region,
    accessKeyId,
    secretAccessKey,
    keyId,
    keyArn,
    address: account.address.toLowerCase() as Hex,
    requests,
    script: (...faults) => void queued.push(...faults),
    always: (fault) => void (standing = fault),
    stop,
  };
}

function reply(res: ServerResponse, status: number, body: Record<string, unknown>): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1', 'content-length': Buffer.byteLength(text), 'x-amzn-requestid': crypto.randomUUID() });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** SEQUENCE { INTEGER r, INTEGER s }, minimal encodings, as KMS returns. */
export function derSignature(r: bigint, s: bigint): Buffer {
  const int = (n: bigint) => {
    let bytes = Buffer.from(hexToBytes(`0x${n.toString(16).padStart(64, '0')}` as Hex));
    while (bytes.length > 1 && bytes[0] === 0 && !(bytes[1]! & 0x80)) bytes = bytes.subarray(1);
    if (bytes[0]! & 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes]);
    return Buffer.concat([Buffer.from([0x02, bytes.length]), bytes]);
  };
  const seq = Buffer.concat([int(r), int(s)]);
  return Buffer.concat([Buffer.from([0x30, seq.length]), seq]);
}
