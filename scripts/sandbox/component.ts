/**
 * The sandbox is a list of components started in order and stopped in reverse: each one brings
 * up one piece of a local world (a chain, a token on it, Ferry itself) and writes what the others
 * need into the shared context: the configuration file's entries, environment variables for
 * Ferry, templates to install, lines for the operator. A second chain, an exchange emulator or
 * an attestation service is one more component.
 */

export interface SandboxChain {
  chainId: number;
  name: string;
  rpcUrl: string;
}

export interface SandboxContext {
  /** Folder for everything the sandbox writes (Ferry's data folder). */
  dataDir: string;
  chains: SandboxChain[];
  /** evm.* entries of the FERRY_CONFIG_FILE the Ferry component writes. */
  config: { chains: Array<Record<string, unknown>>; signers: Array<Record<string, unknown>>; tokens: Array<Record<string, unknown>> };
  /** Top-level sections of the configuration file besides evm (e.g. cctp). */
  sections: Record<string, unknown>;
  /** cex.* entries of the configuration file (the exchange component adds its account). */
  cex?: { accounts: Array<Record<string, unknown>> };
  /** Environment for the Ferry process (e.g. the variable holding a hot wallet's key). */
  ferryEnv: Record<string, string>;
  /** Callback destinations Ferry registers once it runs; `secret` receives each one's signing secret. */
  callbackDestinations?: Array<{ name: string; url: string; nodeEvents: boolean; secret?(secret: string): void }>;
  /** Plan templates Ferry installs once it runs. */
  templates: Array<Record<string, unknown>>;
  /** Facts for the summary (addresses, URLs). */
  facts: Record<string, unknown>;
  log(line: string): void;
}

export interface SandboxComponent {
  name: string;
  start(ctx: SandboxContext): Promise<void>;
  stop?(): Promise<void>;
}

export class Sandbox {
  readonly #started: SandboxComponent[] = [];

  constructor(
    readonly ctx: SandboxContext,
    readonly components: SandboxComponent[],
  ) {}

  async start(): Promise<void> {
    for (const c of this.components) {
      this.ctx.log(`starting ${c.name}`);
      try {
        await c.start(this.ctx);
      } catch (err) {
        await this.stop();
        throw new Error(`sandbox: ${c.name} did not start: ${(err as Error).message}`, { cause: err });
      }
      this.#started.push(c);
    }
  }

  async stop(): Promise<void> {
    while (this.#started.length) {
      const c = this.#started.pop()!;
      this.ctx.log(`stopping ${c.name}`);
      await c.stop?.().catch((err) => this.ctx.log(`${c.name} did not stop cleanly: ${(err as Error).message}`));
    }
  }
}
