// The tool registry: the tools the model may call, their specs for the backends, and argument validation.
import AjvModule from 'ajv';
import type { ToolSpec } from '../../resources/models/types.js';
import { bestPracticeTool } from './bestPractices.js';
import { dataTools } from './dataTools.js';
import { fsTools } from './fsTools.js';
import { grepFilesTool } from './grepFiles.js';
import { harperOperationTools } from './harperOps.js';
import { httpFetchTool } from './httpFetch.js';
import { scheduleFollowupTool } from './followupTool.js';
import { threadTools } from './threadTools.js';
import type { ToolTier } from '../context/window.js';
import type { Capabilities, Tool } from './types.js';
import { memoryTools } from './memoryTools.js';

const Ajv = AjvModule.default ?? AjvModule;

export interface ToolRegistry {
  get(name: string): Tool | undefined;
  names(): string[];
  /** The specs of the tools a run can use (all, without `can`), in the registry's fixed order; a tier below `full`
   * carries short descriptions (`brief`) and no parameter descriptions, `core` only the core tools. */
  specs(can?: Capabilities, tier?: ToolTier): ToolSpec[];
  /** A message naming what is wrong with `args`, or null when they are valid. */
  validate(tool: Tool, args: unknown): string | null;
}

export function createToolRegistry(tools: Tool[]): ToolRegistry {
  const ajv = new Ajv({ allErrors: true, strict: false });
  const byName = new Map(tools.map((t) => [t.name, { tool: t, validate: ajv.compile(t.parameters) }]));
  return {
    get: (name) => byName.get(name)?.tool,
    names: () => [...byName.keys()],
    specs: (can, tier = 'full') =>
      tools
        .filter((t) => (!can || !t.needs || can[t.needs]) && (tier !== 'core' || t.core))
        .map(({ name, description, parameters, brief }) => (tier === 'full' ? { name, description, parameters } : { name, description: brief ?? firstSentence(description), parameters: withoutDescriptions(parameters) as Record<string, unknown> })),
    validate(tool, args) {
      const entry = byName.get(tool.name)!;
      if (entry.validate(args)) return null;
      const problems = (entry.validate.errors ?? []).map((e) => `${e.instancePath ? e.instancePath.slice(1) : 'arguments'} ${e.message}`);
      return `invalid arguments for ${tool.name}: ${problems.join('; ')}`;
    },
  };
}

/** A description's first sentence. */
export function firstSentence(text: string): string {
  return (/^.*?[.!?](?=\s|$)/s.exec(text)?.[0] ?? text).trim();
}

/** A JSON schema without its `description` fields (a small window's tool list: the names and types say enough). */
function withoutDescriptions(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withoutDescriptions);
  if (!schema || typeof schema !== 'object') return schema;
  return Object.fromEntries(Object.entries(schema).filter(([k, v]) => !(k === 'description' && typeof v === 'string')).map(([k, v]) => [k, withoutDescriptions(v)]));
}

/**
 * The model's tools, composed from their sources in this order: the file tools, the data tools, Harper's own
 * operations, then the agent's own extras (http_fetch, schedule_followup, profile_cpu, heap_usage, harper_best_practice). On a name clash the earlier source wins and the later tool is dropped: the file and data tools carry the
 * agent's own guarantees (scopes, paging, hidden tables), which a same-named operation would bypass.
 */
export function composeTools(...sources: Tool[][]): Tool[] {
  const byName = new Map<string, Tool>();
  for (const tool of sources.flat()) if (!byName.has(tool.name)) byName.set(tool.name, tool);
  return [...byName.values()];
}

export const defaultTools: Tool[] = composeTools([...fsTools, grepFilesTool], dataTools, harperOperationTools, [httpFetchTool, scheduleFollowupTool, ...threadTools, bestPracticeTool], memoryTools);
