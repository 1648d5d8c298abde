// The audit of what the agent did: one record per tool call (who, which session, the tool, its arguments with secrets
// redacted, the stored result's size, what the policy decided, when), kept in agent.AgentToolCall, paged and expired
// like the model-call log (agent/recordLog.ts), so an operator can answer "what did the agent read or change on
// Tuesday". Written by the loop as each call is settled (agent/loop.ts); read with list_agent_tool_calls.
import type { WriteBehind } from './writeBehind.js';
import type { ToolCall, ToolMessage } from '../resources/models/types.js';
import { millisOf, RecordLog, type LogRecord, type LogTable } from './recordLog.js';
import { redactSecrets } from './tools/harperOps.js';

/** What became of a call: run (`allowed`, or `approved` after asking), paused for the operator (`asked`), turned down
 * by the operator (`rejected`), by agent.toolPolicy (`denied`) or by the tool itself before asking (`refused`). */
export type Decision = 'allowed' | 'asked' | 'approved' | 'rejected' | 'denied' | 'refused';

export interface ToolCallRecord extends LogRecord {
  user: string | null;
  node: string | null;
  tool: string;
  /** The call's arguments as JSON, secrets redacted and key material withheld (as every served result), at most 4 KiB. */
  arguments: string;
  decision: Decision;
  /** The stored result's UTF-8 bytes (after the cap), or null while it waits for approval. */
  resultBytes: number | null;
  isError: boolean;
  /** Why the stored result is cut, if it is (`cap`). */
  cut: string | null;
}

const MAX_ARGUMENT_BYTES = 4096;

/** A call's arguments as the audit keeps them. */
export function auditedArguments(args: Record<string, unknown>): string {
  const text = JSON.stringify(redactSecrets(args) ?? {});
  const b = Buffer.from(text);
  return b.length <= MAX_ARGUMENT_BYTES ? text : `${b.subarray(0, MAX_ARGUMENT_BYTES).toString('utf8').replace(/\uFFFD$/, '')}… (${b.length} bytes)`;
}

/** The record of one settled call (`result` absent while it waits for approval). */
export function auditRecord(at: { session_id: string; user: string | null; node: string | null }, call: ToolCall, decision: Decision, result?: ToolMessage): ToolCallRecord {
  return {
    id: `${at.session_id}/${call.id}/${decision}`,
    session_id: at.session_id,
    at: Date.now(),
    user: at.user,
    node: at.node,
    tool: call.name,
    arguments: auditedArguments(call.arguments),
    decision,
    resultBytes: result ? Buffer.byteLength(result.content) : null,
    isError: result?.isError === true,
    cut: result?.cut ?? null,
  };
}

const plain = (r: ToolCallRecord): ToolCallRecord => ({
  id: r.id,
  session_id: r.session_id,
  at: millisOf(r.at),
  user: r.user ?? null,
  node: r.node ?? null,
  tool: r.tool,
  arguments: r.arguments,
  decision: r.decision,
  resultBytes: r.resultBytes ?? null,
  isError: r.isError === true,
  cut: r.cut ?? null,
});

export class ToolCallLog extends RecordLog<ToolCallRecord> {
  constructor(table?: () => LogTable | undefined, behind?: WriteBehind) {
    super(table, plain, behind);
  }
}
