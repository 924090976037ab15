/**
 * `ferry executor-host` and `ferry signer-host`: serve local executors, or one signer, over seed
 * 003's remote protocols (src/hosts/), so keys and exchange credentials can live in a process of
 * their own. Both read FERRY_CONFIG_FILE like Ferry does, require their bearer token
 * (FERRY_EXECUTOR_HOST_TOKEN / FERRY_SIGNER_HOST_TOKEN) and the public key of Ferry's host request
 * key (FERRY_HOST_REQUEST_PUBLIC_KEYS), and run until SIGINT or SIGTERM. `ferry hosts keygen`
 * makes that key pair.
 */
import { loadConfig } from '../config.ts';
import { log as rootLog } from '../log.ts';
import { CliError, UsageError, type CliCommand, type CliContext } from './command.ts';

/** The lanes, registries and host servers: loaded by the two host commands only (viem, the KMS client...). */
async function hostModules() {
  const [runtime, evm, registry, remoteConfig, remoteProxy, policy, signerProxy, executorHost, common, signerHost, hostRequests] = await Promise.all([
    import('../actors/runtime.ts'),
    import('../executors/evm/index.ts'),
    import('../executors/registry.ts'),
    import('../executors/remote-config.ts'),
    import('../executors/remote-proxy.ts'),
    import('../executors/signers/evm-policy.ts'),
    import('../executors/signers/remote-proxy.ts'),
    import('../hosts/executor-host.ts'),
    import('../hosts/common.ts'),
    import('../hosts/signer-host.ts'),
    import('../executors/host-requests.ts'),
  ]);
  return {
    configuredRegistries: runtime.configuredRegistries,
    registerEvmLane: evm.registerEvmLane,
    ExecutorRegistry: registry.ExecutorRegistry,
    SignerRegistry: registry.SignerRegistry,
    registerRemoteSigners: remoteConfig.registerRemoteSigners,
    RemoteExecutorProxy: remoteProxy.RemoteExecutorProxy,
    feeCapsOf: policy.feeCapsOf,
    replacementLimitsOf: policy.replacementLimitsOf,
    RemoteSignerProxy: signerProxy.RemoteSignerProxy,
    executorHostApp: executorHost.executorHostApp,
    listenHost: common.listenHost,
    MIN_HOST_TOKEN_LENGTH: common.MIN_HOST_TOKEN_LENGTH,
    signerHostApp: signerHost.signerHostApp,
    HostRequestVerifier: hostRequests.HostRequestVerifier,
  };
}

const listenOptions = { host: { type: 'string' }, port: { type: 'string' } } as const;

function listenAddress(ctx: CliContext, defaultPort: number): { host: string; port: number } {
  const host = ctx.option('host') ?? '127.0.0.1';
  const raw = ctx.option('port') ?? String(defaultPort);
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be a port number, got ${JSON.stringify(raw)}`);
  return { host, port };
}

function requiredToken(value: string | undefined, variable: string, MIN_HOST_TOKEN_LENGTH: number): string {
  if (!value || value.length < MIN_HOST_TOKEN_LENGTH) throw new CliError(`${variable} must be set to a token of at least ${MIN_HOST_TOKEN_LENGTH} characters: a host never serves without one`);
  return value;
}

/** The verifier of Ferry's request signatures; a host never serves without a pinned key. */
function requestVerifier(config: ReturnType<typeof loadConfig>, Verifier: Awaited<ReturnType<typeof hostModules>>['HostRequestVerifier']) {
  if (!config.hostRequestPublicKeys) {
    throw new CliError('FERRY_HOST_REQUEST_PUBLIC_KEYS must be set to the public key of Ferry\'s FERRY_HOST_REQUEST_KEY (ferry hosts keygen): a host acts only on requests Ferry signed');
  }
  return new Verifier({ publicKeys: config.hostRequestPublicKeys, maxAgeSeconds: config.hostRequestMaxAgeSeconds });
}

/** Resolves on the first SIGINT or SIGTERM. */
function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (s: NodeJS.Signals) => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
      resolve(s);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}

const executorHost: CliCommand = {
  path: ['executor-host'],
  summary: 'serve local executors over the remote executor protocol (bearer FERRY_EXECUTOR_HOST_TOKEN)',
  usage: '--executor KEY [--executor KEY ...] [--host 127.0.0.1] [--port 3101]',
  options: { ...listenOptions, executor: { type: 'string', multiple: true } },
  async run(ctx) {
    const keys = ((ctx.values.executor as string[] | undefined) ?? []).filter(Boolean);
    if (keys.length === 0) throw new UsageError('name at least one --executor to serve');
    const { host, port } = listenAddress(ctx, 3101);
    const config = loadConfig(ctx.env);
    const m = await hostModules();
    const { configuredRegistries, RemoteExecutorProxy, executorHostApp, listenHost, MIN_HOST_TOKEN_LENGTH } = m;
    const token = requiredToken(config.executorHostToken, 'FERRY_EXECUTOR_HOST_TOKEN', MIN_HOST_TOKEN_LENGTH);
    const verifier = requestVerifier(config, m.HostRequestVerifier);
    const log = rootLog.child({ host: 'executor' });
    // The lanes need the database for what they share with Ferry (the simulation ledger, EVM nonce reservations).
    return ctx.withDatabase(async (db) => {
      const { executors } = await configuredRegistries(db.pool, config, { env: ctx.env, log });
      const missing = keys.filter((k) => !executors.has(k));
      if (missing.length > 0) throw new CliError(`no local executor ${missing.join(', ')} (configured: ${executors.keys().join(', ')})`);
      const served = keys.map((k) => executors.get(k));
      const remote = served.filter((e) => e instanceof RemoteExecutorProxy);
      if (remote.length > 0) throw new CliError(`${remote.map((e) => e.executorKey).join(', ')} is itself remote here; serve it where it runs`);
      const listening = await listenHost(executorHostApp({ executors: served, token, verifier, log }), host, port);
      log.info({ url: listening.url, executors: keys }, 'executor host listening');
      const signal = await untilSignal();
      log.info({ signal }, 'executor host stopping');
      await listening.stop();
      await Promise.allSettled(served.map((e) => e.close?.()));
    });
  },
};

const signerHost: CliCommand = {
  path: ['signer-host'],
  summary: 'serve one signer over the remote signer protocol, POST /sign and GET /health (bearer FERRY_SIGNER_HOST_TOKEN)',
  usage: '--signer KEY [--host 127.0.0.1] [--port 3102]',
  options: { ...listenOptions, signer: { type: 'string' } },
  async run(ctx) {
    const key = ctx.option('signer');
    if (!key) throw new UsageError('name the --signer to serve');
    const { host, port } = listenAddress(ctx, 3102);
    const config = loadConfig(ctx.env);
    const m = await hostModules();
    const { ExecutorRegistry, SignerRegistry, registerRemoteSigners, registerEvmLane, RemoteSignerProxy, signerHostApp, listenHost, feeCapsOf, replacementLimitsOf } = m;
    const token = requiredToken(config.signerHostToken, 'FERRY_SIGNER_HOST_TOKEN', m.MIN_HOST_TOKEN_LENGTH);
    const verifier = requestVerifier(config, m.HostRequestVerifier);
    const log = rootLog.child({ host: 'signer' });
    // Only the signers: no database, no executors (nothing here is contacted until a request comes).
    const registries = { executors: new ExecutorRegistry(), signers: new SignerRegistry() };
    registerRemoteSigners(config.file.remote, registries.signers, ctx.env, { replacements: replacementLimitsOf(config), feeCaps: feeCapsOf(config.file.evm) });
    await registerEvmLane(config, registries, { env: ctx.env, log, nonces: null });
    if (!registries.signers.has(key)) throw new CliError(`no signer ${key} (configured: ${registries.signers.keys().join(', ') || 'none'})`);
    const signer = registries.signers.get(key);
    if (signer instanceof RemoteSignerProxy) throw new CliError(`${key} is itself remote here; serve it where its key is`);
    const listening = await listenHost(signerHostApp({ signer, token, verifier, log }), host, port);
    log.info({ url: listening.url, signer_key: key }, 'signer host listening');
    const signal = await untilSignal();
    log.info({ signal }, 'signer host stopping');
    await listening.stop();
    await signer.close?.();
  },
};

const keygen: CliCommand = {
  path: ['hosts', 'keygen'],
  summary: "make the key pair Ferry signs its requests to remote hosts with: the private key for Ferry, the public key for each host",
  usage: '[--json]',
  options: { json: { type: 'boolean' } },
  async run(ctx) {
    const { generateHostRequestKey } = await import('../executors/host-requests.ts');
    const pair = generateHostRequestKey();
    if (ctx.flag('json')) {
      ctx.out(JSON.stringify({ FERRY_HOST_REQUEST_KEY: pair.privateKey, FERRY_HOST_REQUEST_PUBLIC_KEYS: pair.publicKey, key_id: pair.keyId }));
      return;
    }
    ctx.out('# Ferry only (a secret, shown once: keep it with Ferry\'s other secrets):');
    ctx.out(`FERRY_HOST_REQUEST_KEY=${pair.privateKey}`);
    ctx.out('# Every ferry executor-host and ferry signer-host (public; append with a comma while rotating):');
    ctx.out(`FERRY_HOST_REQUEST_PUBLIC_KEYS=${pair.publicKey}`);
    ctx.out(`# key id ${pair.keyId}`);
  },
};

export const hostCommands: CliCommand[] = [executorHost, signerHost, keygen];
