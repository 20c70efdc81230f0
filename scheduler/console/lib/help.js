// The console's help: beside each page's title a "?" that opens the page's section of the
// Kadence book in a new tab. The node serves the book under /docs/ when `api.book_dir` is
// set; the console asks once at start (HEAD /docs/index.html) and shows the links only
// when it is there, so a node without the book shows no link that leads nowhere.
//
// HELP_TARGETS is the one place that maps a console page to its book page and anchor. A
// test (tests/reference/console_help.rs) checks that each names a page listed in
// docs/src/SUMMARY.md and, with an anchor, a heading of that page, and that every page's
// link is in it: keep it one `page: 'target',` per line.

import { html } from '../vendor/htm-preact-standalone.module.js';
import { t } from './i18n.js';

export const HELP_TARGETS = {
  dashboard: 'guides/console.html#dashboard',
  jobs: 'guides/console.html#jobs',
  job_form: 'guides/console.html#job',
  script: 'guides/console.html#script',
  runs: 'guides/console.html#runs',
  run: 'guides/console.html#run',
  executors: 'guides/console.html#executors',
  apps: 'guides/console.html#apps',
  users: 'guides/console.html#users',
  tokens: 'guides/console.html#my-tokens',
  audit: 'guides/console.html#audit-trail',
  replays: 'guides/console.html#replays-and-backfills',
  shadow: 'guides/console.html#shadow-report',
};

let bookServed = false;

// Asks whether this node serves the book; never fails (no answer: no help links).
export async function checkBook() {
  try {
    const response = await fetch('/docs/index.html', { method: 'HEAD', credentials: 'same-origin' });
    bookServed = response.ok;
  } catch {
    bookServed = false;
  }
}

// The "?" of console page `page` (a key of HELP_TARGETS), when the book is served.
export function HelpLink({ page }) {
  const target = HELP_TARGETS[page];
  if (!bookServed || !target) return null;
  const label = t('help.link');
  return html`<a class="help" data-help=${page} href=${`/docs/${target}`} target="_blank" rel="noopener"
    title=${label} aria-label=${label}>?</a>`;
}
