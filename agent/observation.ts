// The one seam every tool observation passes: a result, an error or a refusal becomes a tool message within the cap,
// before it is stored (the transcript never holds more than agent.maxToolResultBytes of one result).
import { errorInfo, toolResultText, truncateWithMarker } from '../resources/models/agentLoop.js';
import { isAbortError } from '../resources/models/backendHelpers.js';
import type { ToolCall, ToolMessage } from '../resources/models/types.js';
import type { ToolRegistry } from './tools/index.js';
import type { ToolContext } from './tools/types.js';

/** The one seam every observation passes: a tool result, error or refusal becomes a tool message within the cap. */
export function capObservation(call: ToolCall, value: unknown, isError: boolean, maxBytes: number, advice?: string): ToolMessage {
  const full = toolResultText(value);
  const content = truncateWithMarker(full, maxBytes, advice);
  const message: ToolMessage = { role: 'tool', toolCallId: call.id, name: call.name, content };
  if (isError) message.isError = true;
  if (content !== full) message.cut = 'cap';
  return message;
}

/** Runs one tool call: unknown tools, bad arguments and thrown errors all come back as capped error observations. */
export async function invokeTool(tools: ToolRegistry, call: ToolCall, ctx: ToolContext): Promise<ToolMessage> {
  const tool = tools.get(call.name);
  if (!tool) {
    return capObservation(call, { error: `unknown tool ${JSON.stringify(call.name)}; the tools are ${tools.names().join(', ')}` }, true, ctx.maxResultBytes);
  }
  const problem = tools.validate(tool, call.arguments);
  if (problem) return capObservation(call, { error: problem }, true, ctx.maxResultBytes, tool.advice);
  try {
    const value = await tool.handler(call.arguments, ctx);
    return capObservation(call, value, false, ctx.maxResultBytes, tool.advice);
  } catch (error) {
    if (isAbortError(error, ctx.signal)) throw error;
    return capObservation(call, { error: errorInfo(error) }, true, ctx.maxResultBytes, tool.advice);
  }
}
