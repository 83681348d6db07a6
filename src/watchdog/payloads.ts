/**
 * Notification formats, one per receiver kind. Pure. docs/watchdog.md documents each.
 */
import type { AlertNotification } from './alert-engine';

export const WEBHOOK_SCHEMA = 'outbox-router.watchdog.alert/v1';

/** The generic webhook body: the notification itself, versioned, plus a runbook link. */
export function genericPayload(n: AlertNotification, runbookUrl: string): Record<string, unknown> {
  return { schema: WEBHOOK_SCHEMA, ...n, runbookUrl };
}

const EMOJI: Record<string, string> = { critical: ':red_circle:', warning: ':large_orange_circle:', resolved: ':large_green_circle:', dropped: ':wastebasket:' };

/** Slack incoming webhook: `text` is the fallback that notifications show; `blocks` the message. */
export function slackPayload(n: AlertNotification, runbookUrl: string): { text: string; blocks: unknown[] } {
  const state = n.status === 'firing' ? n.severity.toUpperCase() : n.status.toUpperCase();
  const icon = n.status === 'firing' ? EMOJI[n.severity] : EMOJI[n.status];
  const where = n.slot ? `slot \`${n.slot.name}\` on ${n.cluster}` : typeof n.values.table === 'string' ? `table \`${n.values.table}\` on ${n.cluster}` : n.cluster;
  const title = `${icon} [${state}] ${n.rule} — ${where}`;
  const facts = Object.entries(n.values)
    .filter(([, v]) => v !== null)
    .slice(0, 10)
    .map(([k, v]) => `*${k}*: ${String(v)}`)
    .join('  ·  ');
  return {
    text: `[${state}] ${n.rule} ${where}: ${n.summary}`,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: `*${title}*\n${n.summary}` } },
      ...(facts ? [{ type: 'context', elements: [{ type: 'mrkdwn', text: facts }] }] : []),
      { type: 'context', elements: [{ type: 'mrkdwn', text: `event ${n.event} · since ${n.startsAt} · dedup \`${n.dedupKey}\` · <${runbookUrl}|runbook>` }] },
    ],
  };
}

export interface AlertmanagerAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  startsAt: string;
  endsAt: string;
  generatorURL: string;
}

/**
 * Alertmanager `POST /api/v2/alerts` body. `severity` is a label, so an escalation is a new
 * Alertmanager alert: the previous severity's one is ended in the same post. A firing alert carries
 * `endsAt` = now + `validForMs` and is re-posted before that (Prometheus does the same).
 */
export function alertmanagerPayload(notifications: AlertNotification[], runbookUrl: string, validForMs: number): AlertmanagerAlert[] {
  const out: AlertmanagerAlert[] = [];
  for (const n of notifications) {
    const labels = (severity: string): Record<string, string> => {
      const l: Record<string, string> = { alertname: n.rule, cluster: n.cluster, severity, dedup_key: n.dedupKey, service: 'outbox-watchdog' };
      if (n.slot) {
        l.slot_name = n.slot.name;
        if (n.slot.database) l.database = n.slot.database;
        if (n.slot.type) l.slot_type = n.slot.type;
      }
      // The outbox rules judge a table, not a slot.
      if (typeof n.values.table === 'string') l.table = n.values.table;
      return l;
    };
    const annotations = { summary: n.summary, runbook_url: runbookUrl, ...(n.status === 'dropped' ? { ended_because: 'slot_dropped' } : {}) };
    const ending = n.status !== 'firing';
    out.push({
      labels: labels(n.severity),
      annotations,
      startsAt: n.startsAt,
      endsAt: ending ? (n.endsAt ?? n.at) : new Date(Date.parse(n.at) + validForMs).toISOString(),
      generatorURL: runbookUrl,
    });
    if ((n.event === 'escalated' || n.event === 'deescalated') && n.previousSeverity && n.previousSeverity !== 'ok' && n.previousSeverity !== n.severity) {
      out.push({ labels: labels(n.previousSeverity), annotations, startsAt: n.startsAt, endsAt: n.at, generatorURL: runbookUrl });
    }
  }
  return out;
}
