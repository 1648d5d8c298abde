// The agent.* config: one schema (schema/config.schema.json) for its keys, defaults and bounds; read at boot
// from Harper's config, then AGENT_<KEY> env vars, then --AGENT_<KEY> flags; set_agent_config's changes go over
// those (agent/configStore.ts keeps them).
import { readFileSync } from 'node:fs';
import AjvModule from 'ajv';
import type { Price } from './modelCatalog.js';

const Ajv = AjvModule.default ?? AjvModule;

interface KeySchema {
  type: string;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  enum?: unknown[];
  maxItems?: number;
  maxProperties?: number;
  items?: { pattern?: string };
  description?: string;
}

export const CONFIG_SCHEMA = JSON.parse(
  readFileSync(new URL('../../schema/config.schema.json', import.meta.url), 'utf8')
) as { properties: Record<string, KeySchema> };

export interface AgentConfig {
  provider: string;
  model?: string;
  maxTurns: number;
  maxToolResultBytes: number;
  workingSetBytes: number;
  compaction: boolean;
  compactAtPercent: number;
  followupMinSeconds: number;
  followupMaxSeconds: number;
  maxFollowups: number;
  memoryRecallBytes: number;
  retainSessionsDays?: number;
  retainModelCallsDays?: number;
  autoApprove: boolean;
  maxTokens?: number;
  apiKey?: string;
  baseUrl?: string;
  region?: string;
  requestTimeoutMs: number;
  maxRetries: number;
  contextWindowTokens?: number;
  fetchAllow?: string[];
  allowOperations?: string[];
  /** Harper roles besides super_user that may use the agent (agent/access.ts). */
  roles?: string[];
  /** Per tool allow/ask/deny (or readOnly), by role name or "*" (agent/toolPolicy.ts). */
  toolPolicy?: Record<string, 'readOnly' | Record<string, 'allow' | 'ask' | 'deny'>>;
  /** File scopes by role name (agent/access.ts). */
  roleScopes?: Record<string, ('components' | 'logs' | 'config')[]>;
  systemPromptAppend?: string;
  user?: string;
  stream: boolean;
  maxCostUsd?: number;
  maxSessionCostUsd?: number;
  prices?: Record<string, Price>;
}

export const CONFIG_KEYS = Object.keys(CONFIG_SCHEMA.properties) as (keyof AgentConfig)[];

function bounds(key: keyof AgentConfig) {
  const p = CONFIG_SCHEMA.properties[key]!;
  return { default: p.default as number, min: p.minimum as number, max: p.maximum as number };
}
/** The cap's bounds, from the schema: the one definition boot and set_agent_config share. */
export const MAX_TOOL_RESULT_BYTES = bounds('maxToolResultBytes');

export function defaultConfig(): AgentConfig {
  const config: Record<string, unknown> = {};
  for (const key of CONFIG_KEYS) {
    const d = CONFIG_SCHEMA.properties[key]!.default;
    if (d !== undefined) config[key] = d;
  }
  return config as unknown as AgentConfig;
}

const strictAjv = new Ajv({ allErrors: true, useDefaults: false });
const coercingAjv = new Ajv({ allErrors: true, coerceTypes: true, useDefaults: false });
const validateStrict = strictAjv.compile(CONFIG_SCHEMA);
const validateCoercing = coercingAjv.compile(CONFIG_SCHEMA);

function describeProblem(key: string, errors: { keyword: string; message?: string; params?: Record<string, unknown> }[]): string {
  const p = CONFIG_SCHEMA.properties[key];
  if (!p) return `agent.${key} is not a known key (known: ${CONFIG_KEYS.join(', ')})`;
  const range = p.minimum !== undefined ? ` from ${p.minimum} to ${p.maximum}` : '';
  const e = errors[0];
  if (e?.keyword === 'enum') return `agent.${key} must be one of ${(e.params?.allowedValues as unknown[]).join(', ')}`;
  if (p.type === 'integer') return `agent.${key} must be an integer${range}`;
  if (p.type === 'number') return `agent.${key} must be a number${range}`;
  if (p.type === 'boolean') return `agent.${key} must be true or false`;
  return `agent.${key} ${e?.message ?? 'is invalid'}`;
}

/** Checks one key and its value; returns the (coerced, for env/CLI text) value or a problem naming the key. */
export function checkConfigValue(
  key: string,
  value: unknown,
  coerce: boolean
): { ok: true; value: unknown } | { ok: false; problem: string } {
  if (!(key in CONFIG_SCHEMA.properties)) return { ok: false, problem: describeProblem(key, []) };
  const holder: Record<string, unknown> = { [key]: value };
  const validate = coerce ? validateCoercing : validateStrict;
  if (validate(holder)) return { ok: true, value: holder[key] };
  return { ok: false, problem: describeProblem(key, (validate.errors ?? []) as never) };
}

/** Maps any spelling of a key (maxToolResultBytes, MAXTOOLRESULTBYTES) to the schema's own. */
function canonicalKey(name: string): string | undefined {
  const lower = name.toLowerCase();
  return CONFIG_KEYS.find((k) => k.toLowerCase() === lower);
}

export interface Warn {
  (message: string): void;
}

/** Reads the `--AGENT_<KEY> value` and `--AGENT_<KEY>=value` flags. */
export function cliAgentFlags(argv: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--AGENT_([A-Za-z0-9_]+)(?:=(.*))?$/.exec(argv[i]!);
    if (!m) continue;
    if (m[2] !== undefined) out[m[1]!] = m[2];
    else if (i + 1 < argv.length) out[m[1]!] = argv[++i]!;
  }
  return out;
}

/**
 * Boot config: Harper's `agent:` block, then env, then CLI, each key validated on its own. An invalid value is
 * logged naming the key, the value and what is used instead; it never stops Harper.
 */
export function loadAgentConfig(
  harperAgentBlock: unknown,
  env: NodeJS.ProcessEnv,
  argv: readonly string[],
  warn: Warn
): AgentConfig {
  const config = defaultConfig() as unknown as Record<string, unknown>;
  const origin: Record<string, string> = {};
  const apply = (source: string, name: string, value: unknown, coerce: boolean) => {
    const key = canonicalKey(name);
    if (!key) {
      warn(`harper-agent: ignoring unknown config key ${source === 'harperdb-config.yaml' ? `agent.${name}` : name} from ${source}`);
      return;
    }
    // Text from env or a flag for a key that holds an object (agent.prices) is JSON.
    if (typeof value === 'string' && CONFIG_SCHEMA.properties[key]!.type === 'object') {
      try {
        value = JSON.parse(value);
      } catch {
        // reported as invalid below
      }
    }
    const checked = checkConfigValue(key, value, coerce);
    if (checked.ok) {
      config[key] = checked.value;
      origin[key] = source;
    } else {
      const inForce = config[key] === undefined ? 'unset' : JSON.stringify(config[key]);
      const from = origin[key] ? `from ${origin[key]}` : 'the default';
      warn(`harper-agent: invalid agent.${key} ${JSON.stringify(value)} from ${source} (${checked.problem}); using ${inForce} (${from})`);
    }
  };
  if (harperAgentBlock && typeof harperAgentBlock === 'object') {
    for (const [name, value] of Object.entries(harperAgentBlock)) apply('harperdb-config.yaml', name, value, true);
  }
  for (const [name, value] of Object.entries(env)) {
    const m = /^AGENT_([A-Z0-9_]+)$/.exec(name);
    if (m && value !== undefined) apply(`env ${name}`, m[1]!, value, true);
  }
  for (const [name, value] of Object.entries(cliAgentFlags(argv))) apply(`flag --AGENT_${name}`, name, value, true);
  return config as unknown as AgentConfig;
}

/**
 * A set_agent_config change, every key checked strictly (no coercion), all or nothing. A null value takes the key's
 * persisted change back (the boot config or the default applies again). Returns one problem per bad key, or the
 * checked change.
 */
export function checkConfigChange(change: Record<string, unknown>): { ok: true; change: Record<string, unknown> } | { ok: false; problems: string[] } {
  const checked: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, value] of Object.entries(change)) {
    const result = value === null && key in CONFIG_SCHEMA.properties ? { ok: true as const, value: null } : checkConfigValue(key, value, false);
    if (result.ok) checked[key] = result.value;
    else problems.push(result.problem);
  }
  return problems.length ? { ok: false, problems } : { ok: true, change: checked };
}

/**
 * The config in force: the boot config with the persisted changes over it. A persisted value that no longer passes
 * the schema (a bound tightened since) is skipped with a warning naming it, never applied.
 */
export function withChanges(base: AgentConfig, changes: Record<string, unknown>, warn: Warn): AgentConfig {
  const config = { ...base } as unknown as Record<string, unknown>;
  for (const [key, value] of Object.entries(changes)) {
    const checked = checkConfigValue(key, value, false);
    if (checked.ok) config[key] = checked.value;
    else warn(`harper-agent: ignoring the stored agent.${key} ${JSON.stringify(value)} (${checked.problem}); using ${JSON.stringify(config[key] ?? null)}`);
  }
  return config as unknown as AgentConfig;
}

/** The config as an operator may see it: the API key is never echoed. */
export function publicConfig(config: Partial<AgentConfig>): Record<string, unknown> {
  const { apiKey, ...rest } = config;
  return { ...rest, ...(apiKey ? { apiKey: '(set)' } : {}) };
}

const number = (n: number) => n.toLocaleString('en-US');

/** A key's bounds in words, from the schema: what `harper-agent config` and the README's table both print. */
export function boundsText(key: string): string {
  const p = CONFIG_SCHEMA.properties[key];
  if (!p) return '';
  if (p.enum) return `one of ${p.enum.join(', ')}`;
  if (p.type === 'array') return `up to ${p.maxItems} ${p.items?.pattern === '^[a-z_]+$' ? 'operation names' : p.items?.pattern === '^[A-Za-z0-9_.-]+$' ? 'role names' : 'http(s) origins'}`;
  if (p.type === 'boolean') return 'true or false';
  if (p.type === 'integer' || p.type === 'number') return `${number(p.minimum!)} to ${number(p.maximum!)}`;
  if (p.type === 'object') return `up to ${p.maxProperties} ${key === 'roleScopes' || key === 'toolPolicy' ? 'roles' : 'models'}`;
  if (p.pattern === '^https?://') return 'an http:// or https:// URL';
  if (p.maxLength !== undefined) return `${p.minLength ? `${number(p.minLength)} to ` : 'up to '}${number(p.maxLength)} characters`;
  return 'not empty';
}

/** A key's default as text (`unset` when the schema has none: the description says what applies then). */
export function defaultText(key: string): string {
  const d = CONFIG_SCHEMA.properties[key]?.default;
  return d === undefined ? 'unset' : typeof d === 'number' ? number(d) : String(d);
}

/** A key's description from the schema. */
export function describeKey(key: string): string {
  return CONFIG_SCHEMA.properties[key]?.description ?? '';
}
