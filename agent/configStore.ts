// The agent.* config in force on this thread: the boot config (harperdb-config.yaml, env, flags: agent.ts) with the
// changes set_agent_config made over it. Those changes live in the agent.AgentSetting table, one row per key: so a
// change survives a restart, every worker thread follows the table (a subscription) and has it within moments, and
// in a cluster it replicates to every node. Two changes to different keys never overwrite each other.
import { checkConfigChange, publicConfig, withChanges, type AgentConfig, type Warn } from './agent.js';

export interface SettingRow {
  key: string;
  value: unknown;
  updatedAt?: Date;
  updatedBy?: string | null;
}

export interface SettingTable {
  put(id: string, record: SettingRow): Promise<unknown> | unknown;
  delete(id: string): Promise<unknown> | unknown;
  search(query: Record<string, unknown>): AsyncIterable<unknown>;
  subscribe?(query: Record<string, unknown>): Promise<{ on(event: 'data', listener: () => void): unknown }> | { on(event: 'data', listener: () => void): unknown };
}

/** What set_agent_config answers: the config in force, and what this request persisted (null: taken back). */
export interface ConfigChangeResult {
  config: AgentConfig;
  persisted: Record<string, unknown>;
}

export class ConfigChangeError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('; '));
  }
}

export class ConfigStore {
  private changes: Record<string, unknown> = {};
  private config: AgentConfig;
  /** Serializes reloads and changes: an older read never lands after a newer one, nor after a change this thread made
   * (a read taken between a change's writes once put an operator's setting back for the next request). */
  private reloading: Promise<void> = Promise.resolve();

  constructor(
    private readonly base: AgentConfig,
    private readonly table: () => SettingTable | undefined,
    private readonly warn: Warn
  ) {
    this.config = base;
  }

  current(): AgentConfig {
    return this.config;
  }

  /** The persisted changes, as an operator may see them (the API key as "(set)"). */
  persisted(): Record<string, unknown> {
    return publicConfig(this.changes as Partial<AgentConfig>);
  }

  /** Reads every persisted change again and applies it over the boot config. */
  reload(): Promise<void> {
    // Chained after the previous reload whatever its outcome: one failed read must not stop every later one.
    this.reloading = this.reloading.catch(() => undefined).then(async () => {
      const table = this.table();
      if (!table) return;
      const changes: Record<string, unknown> = {};
      for await (const row of table.search({ conditions: [] })) {
        const { key, value } = row as SettingRow;
        if (typeof key === 'string') changes[key] = value;
      }
      this.use(changes);
    });
    return this.reloading;
  }

  /** Follows the table: a change written by another thread (or node) is in force here after its event. */
  async follow(): Promise<void> {
    const table = this.table();
    if (!table?.subscribe) return;
    const queue = await table.subscribe({ isCollection: true, omitCurrent: true });
    queue.on('data', () => void this.reload().catch((error) => this.warn(`harper-agent: could not reload agent settings: ${error}`)));
  }

  /** Checks the whole change (all or nothing; each key, then `combined` on the config it would put in force), persists
   * it key by key, and puts it in force on this thread at once. */
  async set(change: Record<string, unknown>, user: string | null, combined?: (next: AgentConfig) => Promise<string | null>): Promise<ConfigChangeResult> {
    const checked = checkConfigChange(change);
    if (!checked.ok) throw new ConfigChangeError(checked.problems);
    if (combined) {
      const next = { ...this.changes };
      for (const [key, value] of Object.entries(checked.change)) {
        if (value === null) delete next[key];
        else next[key] = value;
      }
      const problem = await combined(withChanges(this.base, next, () => undefined));
      if (problem) throw new ConfigChangeError([problem]);
    }
    const table = this.table();
    if (!table) throw new Error('the agent.AgentSetting table is not available');
    // Queued behind any reload in flight and ahead of those its own writes' events start: the change is the last word
    // on this thread.
    const done = this.reloading.catch(() => undefined).then(() => this.write(table, checked.change, user));
    this.reloading = done.then(
      () => undefined,
      () => undefined // the caller has the error; the chain goes on
    );
    return done;
  }

  private async write(table: SettingTable, change: Record<string, unknown>, user: string | null): Promise<ConfigChangeResult> {
    const updatedAt = new Date();
    for (const [key, value] of Object.entries(change)) {
      if (value === null) await table.delete(key);
      else await table.put(key, { key, value, updatedAt, updatedBy: user });
    }
    const next = { ...this.changes };
    for (const [key, value] of Object.entries(change)) {
      if (value === null) delete next[key];
      else next[key] = value;
    }
    this.use(next);
    const persisted: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(change)) persisted[key] = key === 'apiKey' && value !== null ? '(set)' : value;
    return { config: this.config, persisted };
  }

  private use(changes: Record<string, unknown>): void {
    this.changes = changes;
    this.config = withChanges(this.base, changes, this.warn);
  }
}
