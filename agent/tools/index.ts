// The tool registry: the tools the model may call, their specs for the backends, and argument validation.
import AjvModule from 'ajv';
import type { ToolSpec } from '../../resources/models/types.js';
import { dataTools } from './dataTools.js';
import { fsTools } from './fsTools.js';
import { grepFilesTool } from './grepFiles.js';
import type { Tool } from './types.js';

const Ajv = AjvModule.default ?? AjvModule;

export interface ToolRegistry {
  get(name: string): Tool | undefined;
  names(): string[];
  specs(): ToolSpec[];
  /** A message naming what is wrong with `args`, or null when they are valid. */
  validate(tool: Tool, args: unknown): string | null;
}

export function createToolRegistry(tools: Tool[]): ToolRegistry {
  const ajv = new Ajv({ allErrors: true, strict: false });
  const byName = new Map(tools.map((t) => [t.name, { tool: t, validate: ajv.compile(t.parameters) }]));
  return {
    get: (name) => byName.get(name)?.tool,
    names: () => [...byName.keys()],
    specs: () => tools.map(({ name, description, parameters }) => ({ name, description, parameters })),
    validate(tool, args) {
      const entry = byName.get(tool.name)!;
      if (entry.validate(args)) return null;
      const problems = (entry.validate.errors ?? []).map((e) => `${e.instancePath ? e.instancePath.slice(1) : 'arguments'} ${e.message}`);
      return `invalid arguments for ${tool.name}: ${problems.join('; ')}`;
    },
  };
}

export const defaultTools: Tool[] = [...fsTools, grepFilesTool, ...dataTools];
