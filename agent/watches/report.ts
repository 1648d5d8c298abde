// A watch's run: the prompt it starts with (the operator's words after what fired, where, and how to report), and the
// report it ends with: the run's answer in four sections, what fired it, and its cost, with no key material.
import type { CallTotals } from '../modelCalls.js';
import { redactSecrets } from '../tools/harperOps.js';
import { describeTrigger, type Evidence, type Watch } from './watch.js';

export const REPORT_SECTIONS = ['What happened', 'Evidence', 'Ruled out', 'Next steps'] as const;

/** The first prompt of a watch's run. A log trigger's first and last lines come with their positions, so the model
 * starts reading where the trouble is. */
export function watchPrompt(w: Watch, e: Evidence, firedAt: number): string {
  const lines = [`The watch "${w.name}" fired at ${new Date(firedAt).toISOString()} on ${describeTrigger(w.trigger)}: ${e.summary}.`];
  if (e.log) {
    lines.push(
      `First matching line, logs/${e.log.path} line ${e.log.first.line} (byte ${e.log.first.offset}):`,
      e.log.first.text,
      ...(e.log.count > 1 ? [`Last matching line, line ${e.log.last.line} (byte ${e.log.last.offset}):`, e.log.last.text] : []),
      `Read around them with read_file (root "logs", path "${e.log.path}", startLine ${e.log.first.line}) or grep_files.`
    );
  }
  if (e.metric) lines.push(`${e.metric.metric}.${e.metric.attribute} was ${e.metric.value} at ${new Date(e.metric.at).toISOString()}, out of bounds since ${new Date(e.metric.since).toISOString()}.`);
  if (e.cluster) lines.push(`Down since ${new Date(e.cluster.since).toISOString()}: ${e.cluster.down.join(', ')}.`);
  lines.push('', w.prompt, '', `Investigate, then answer with a report in four Markdown sections: ${REPORT_SECTIONS.map((s) => `## ${s}`).join(', ')}. Under Evidence give file and line, or metric and time.`);
  return lines.join('\n');
}

/** The answer's four sections by heading (any heading level, any case); a section the answer lacks is null. */
export function reportSections(answer: string): Record<'whatHappened' | 'evidence' | 'ruledOut' | 'nextSteps', string | null> {
  const keys = ['whatHappened', 'evidence', 'ruledOut', 'nextSteps'] as const;
  const out = { whatHappened: null, evidence: null, ruledOut: null, nextSteps: null } as Record<(typeof keys)[number], string | null>;
  const headings = [...answer.matchAll(/^#{1,6}\s*(.+?)\s*#*\s*$/gm)];
  headings.forEach((h, i) => {
    const at = REPORT_SECTIONS.findIndex((s) => s.toLowerCase() === h[1]!.replace(/[*_:]/g, '').trim().toLowerCase());
    if (at < 0) return;
    const end = headings[i + 1]?.index ?? answer.length;
    out[keys[at]!] = answer.slice(h.index! + h[0].length, end).trim() || null;
  });
  return out;
}

export interface RunOutcome {
  session_id: string;
  status: string;
  answer: string | null;
  lastError: string | null;
  firedAt: number;
  finishedAt: number;
  totals: CallTotals;
}

/** The report a watch's run delivers, with nothing in it that holds key material. */
export function buildReport(w: Watch, node: string | null, e: Evidence, run: RunOutcome): Record<string, unknown> {
  const sections = reportSections(run.answer ?? '');
  const report = {
    watch_id: w.watch_id,
    watch: w.name,
    node,
    session_id: run.session_id,
    status: run.status,
    firedAt: new Date(run.firedAt).toISOString(),
    finishedAt: new Date(run.finishedAt).toISOString(),
    trigger: { description: describeTrigger(w.trigger), ...e },
    ...sections,
    answer: run.answer,
    lastError: run.lastError,
    cost: { usd: run.totals.costUsd, requests: run.totals.requests, inputTokens: run.totals.inputTokens, outputTokens: run.totals.outputTokens },
  };
  return redactSecrets(report) as Record<string, unknown>;
}

/** The webhook's body: the report, and a Slack-compatible `text` (a line that says what fired and what was found). */
export function deliveryBody(report: Record<string, any>): Record<string, unknown> {
  const found = report.whatHappened ?? report.answer ?? report.lastError ?? 'no answer';
  const cost = report.cost?.usd !== null && report.cost?.usd !== undefined ? ` · $${Number(report.cost.usd).toFixed(4)}` : '';
  const text = `Harper Agent watch "${report.watch}" on ${report.node ?? 'this node'} (${report.status}): ${String(found).slice(0, 600)}\n${report.trigger?.summary ?? ''} · session ${report.session_id}${cost}`;
  return { text, report };
}
