// schedule_followup: the model asks to be told something later, in this session; the follow-up starts a new run when
// it is due (agent/followups.ts stores and fires it).
import { ToolError, type Tool } from './types.js';

export const scheduleFollowupTool: Tool = {
  name: 'schedule_followup',
  needs: 'followups',
  description:
    'Have a message sent back to this session later, which starts a new run then: to check again on something that ' +
    'takes time (a job, a restart, replication catching up, a log that should stop growing). Pass delaySeconds, or at ' +
    '(an ISO 8601 time, UTC), and the message you want to receive, saying what to check and why. It survives a restart; ' +
    'the operator can list and cancel it. Answers its followup_id and when it is due.',
  parameters: {
    type: 'object',
    properties: {
      delaySeconds: { type: 'number', description: 'Seconds from now (within agent.followupMinSeconds and agent.followupMaxSeconds).' },
      at: { type: 'string', maxLength: 40, description: 'When, as an ISO 8601 time (e.g. 2026-12-04T20:00:00Z); instead of delaySeconds.' },
      message: { type: 'string', minLength: 1, maxLength: 4000, description: 'What you want to be told then.' },
    },
    required: ['message'],
    additionalProperties: false,
  },
  async handler(args, ctx) {
    if (!ctx.scheduleFollowup) throw new ToolError('follow-ups are not available in this run');
    const f = await ctx.scheduleFollowup(args as { delaySeconds?: unknown; at?: unknown; message: string });
    return { followup_id: f.followup_id, dueAt: new Date(f.dueAt).toISOString(), inSeconds: Math.round((f.dueAt - Date.now()) / 1000) };
  },
};
