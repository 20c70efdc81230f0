// Times in the viewer's zone, with the job's zone on hover; durations; local-time inputs.

import { html } from '../vendor/htm-preact-standalone.module.js';
import { locale, t } from './i18n.js';

function formatter(timeZone) {
  return new Intl.DateTimeFormat(locale(), {
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hour12: false,
    timeZone,
    timeZoneName: timeZone ? 'short' : undefined,
  });
}

export function formatTime(ms, timeZone) {
  if (ms === null || ms === undefined) return '';
  try {
    return formatter(timeZone).format(new Date(ms));
  } catch {
    return formatter(undefined).format(new Date(ms));
  }
}

// An instant in the viewer's zone; hovering shows it in `zone` (the job's) too.
export function Time({ ms, zone }) {
  if (ms === null || ms === undefined) return html`<span class="muted">—</span>`;
  const hover = zone ? `${formatTime(ms, zone)} (${zone})` : new Date(ms).toISOString();
  return html`<time datetime=${new Date(ms).toISOString()} title=${hover}>${formatTime(ms)}</time>`;
}

export function formatDuration(ms) {
  if (ms === null || ms === undefined || ms < 0) return '';
  if (ms < 1000) return t('format.ms', { n: ms });
  const seconds = ms / 1000;
  if (seconds < 60) return t('format.seconds', { n: seconds.toFixed(seconds < 10 ? 1 : 0) });
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return t('format.minutes', { m: minutes, s: Math.round(seconds % 60) });
  return t('format.hours', { h: Math.floor(minutes / 60), m: minutes % 60 });
}

// `datetime-local` input value <-> ms, in the viewer's zone.
export function toLocalInput(ms) {
  if (!ms) return '';
  const date = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return date.toISOString().slice(0, 19);
}

export function fromLocalInput(value) {
  if (!value) return undefined;
  const ms = new Date(value).getTime();
  return Number.isNaN(ms) ? undefined : ms;
}

// Start of the viewer's day `daysAgo` days back, ms.
export function startOfDay(daysAgo = 0) {
  const date = new Date();
  date.setHours(0, 0, 0, 0);
  date.setDate(date.getDate() - daysAgo);
  return date.getTime();
}
