// A prompt as it is stored: its text, and what the agent's memory recalled for it within agent.memoryRecallBytes.
// Every way a prompt enters a session (agent_prompt, a follow-up, a watch's run) builds it here, so each carries its
// recall; the request sends it after the prompt (agent/context/request.ts asSent), past the stable prefix, and later
// requests repeat it as stored.
import type { LoopDeps } from '../loopDeps.js';
import type { Message } from '../../resources/models/types.js';

type Prompt = Extract<Message, { role: 'user' }>;

export async function promptWithRecall(deps: Pick<LoopDeps, 'memory' | 'config' | 'log'>, content: string, extra: Partial<Prompt> = {}): Promise<Prompt> {
  const budget = deps.config().memoryRecallBytes;
  // A memory that cannot answer (its table not there yet) costs the prompt nothing but the recall.
  const recall = deps.memory && budget > 0 ? await deps.memory.recall(content, budget).catch((error) => (deps.log?.(`harper-agent: recall failed: ${error}`), null)) : null;
  return { role: 'user', content, ...extra, ...(recall ? { recall: recall.text } : {}) };
}
