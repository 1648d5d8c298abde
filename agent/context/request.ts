// What the model sees, decided in one place (DESIGN.md "What the model sees"). A request is a pure function of the
// stored transcript and the policy in force: the system text (the prompt, where the agent runs, the operator's
// instructions), the tools in a fixed order, then the messages the newest compaction left whole, each prompt with the
// time it was sent. Nothing in it depends on the clock or on the request before it, so two requests of a session share
// every byte up to the newest turn unless the transcript changed there (a working-set cut, a shrink, a compaction:
// each done in batches, so the following requests are stable again). The loop sends what this builds; the pre-flight,
// compaction sizing, get_agent_session's estimate and preview_agent_request read the same.
import { answeredTranscript, sentLine } from '../../resources/models/backendHelpers.js';
import type { GenerateInput, Message, ToolSpec } from '../../resources/models/types.js';
import type { AgentConfig } from '../agent.js';
import { requestMessages, type StoredMessage } from '../compaction.js';
import { environmentBlock, type HostEnvironment } from '../environment.js';
import { cutMessage, workingSetCuts } from '../session.js';
import { systemPrompt } from '../systemPrompt.js';
import type { ToolTier } from './window.js';

/** What shapes a request besides the transcript: the config in force, the model, the tools offered, where it runs. */
export interface RequestPolicy {
  config: Pick<AgentConfig, 'systemPromptAppend'> & { maxTokens: number };
  model: string;
  /** In the registry's fixed order: a tool list that changed order would change the cached prefix. */
  tools: ToolSpec[];
  environment?: HostEnvironment;
  /** The session: the cache key, where an API takes one. */
  sessionId?: string;
  /** Mark the cached prefix for APIs that cache only at marks (cacheMarksFor decides). */
  cacheMarks?: boolean;
  /** The window's tool tier (agent/context/window.ts): `core` carries the brief system prompt too. */
  tier?: ToolTier;
}

/** The system text: the same for every request of a session while the config stays the same. */
export function systemText(policy: { config: Pick<AgentConfig, 'systemPromptAppend'>; environment?: HostEnvironment; tier?: ToolTier }): string {
  return systemPrompt(policy.config.systemPromptAppend, policy.environment && environmentBlock(policy.environment), policy.tier === 'core');
}

/** A message as the model is sent it: a prompt, then what memory recalled for it (stored with it, so every later
 * request repeats it byte for byte), then the time it was sent (stored prompts carry `at`). */
function asSent(m: Message): Message {
  if (m.role !== 'user' || (!m.at && !m.recall)) return m;
  const { recall, ...prompt } = m;
  return { ...prompt, content: m.content + (recall ? `\n\n${recall}` : '') + (m.at ? sentLine(m.at) : '') };
}

/** The transcript with the working set's cuts applied, as the loop stores them before its next call (a copy). */
export function withWorkingSet(messages: readonly StoredMessage[], budgetBytes: number, headBytes?: number): readonly StoredMessage[] {
  const cuts = new Set(budgetBytes ? workingSetCuts(messages, budgetBytes, headBytes) : []);
  return cuts.size ? messages.map((m, i) => (cuts.has(i) ? cutMessage(m as Extract<Message, { role: 'tool' }>, 'workingSet', headBytes) : m)) : messages;
}

/** The next request for a transcript: what the model sees, every tool call answered. */
export function buildRequest(messages: readonly StoredMessage[], policy: RequestPolicy): GenerateInput {
  const input: GenerateInput = {
    system: systemText(policy),
    messages: answeredTranscript(requestMessages(messages)).map(asSent),
    tools: policy.tools,
    model: policy.model,
    maxTokens: policy.config.maxTokens,
  };
  if (policy.sessionId) input.cache = { key: policy.sessionId, marks: policy.cacheMarks === true };
  return input;
}

/** Where a request is cached only at marks, mark it: always for Anthropic's API (every current model caches); for
 * Bedrock only a model the catalog (or agent.prices) gives a cache price, since Bedrock refuses marks a model cannot
 * use. OpenAI and Ollama cache without marks. */
export function cacheMarksFor(provider: string, cachePriced: boolean): boolean {
  return provider === 'anthropic' || (provider === 'bedrock' && cachePriced);
}

export interface RequestPart {
  part: 'tools' | 'system' | 'messages';
  bytes: number;
}

/** What a request holds, as preview_agent_request shows it: each part's size, where the stable prefix ends (the part
 * the previous request of the session already sent, so a provider's cache can hold it), the results cut. */
export interface RequestView {
  parts: RequestPart[];
  bytes: number;
  messages: number;
  /** Bytes of the request before its newest turn (the tools, the system text and every message before the newest
   * prompt or tool result): what the next request repeats byte for byte unless a cut or a compaction comes first. */
  stablePrefixBytes: number;
  /** Tool results sent cut (by the cap, a context shrink or the working set), by index in the request's messages. */
  cut: { index: number; name: string; cut: string; bytes: number }[];
}

const jsonBytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

export function describeRequest(input: GenerateInput): RequestView {
  const tools = jsonBytes(input.tools);
  const system = Buffer.byteLength(input.system);
  const sizes = input.messages.map(jsonBytes);
  // The newest turn: the messages after the newest assistant message (the prompt, or the tool results it asked for).
  let newest = input.messages.length;
  while (newest > 0 && input.messages[newest - 1]!.role !== 'assistant') newest--;
  const before = sizes.slice(0, newest).reduce((a, b) => a + b, 0);
  const messages = sizes.reduce((a, b) => a + b, 0);
  return {
    parts: [
      { part: 'tools', bytes: tools },
      { part: 'system', bytes: system },
      { part: 'messages', bytes: messages },
    ],
    bytes: tools + system + messages,
    messages: input.messages.length,
    stablePrefixBytes: tools + system + before,
    cut: input.messages.flatMap((m, index) => (m.role === 'tool' && m.cut ? [{ index, name: m.name, cut: m.cut, bytes: Buffer.byteLength(m.content) }] : [])),
  };
}
