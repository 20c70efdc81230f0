// Messages: every string the console shows comes from the catalogs in i18n/{locale}/,
// served merged as /console/i18n/{locale}.json. A missing message shows its key, so a gap
// is visible rather than silently English.

export const LOCALES = ['en', 'zh-CN'];

let messages = {};
let current = 'en';

export function locale() {
  return current;
}

// The browser's preferred language among the console's, English otherwise.
export function browserLocale() {
  for (const wanted of navigator.languages ?? [navigator.language]) {
    const lower = (wanted ?? '').toLowerCase();
    if (lower.startsWith('zh')) return 'zh-CN';
    if (lower.startsWith('en')) return 'en';
  }
  return 'en';
}

export async function loadLocale(next) {
  const chosen = LOCALES.includes(next) ? next : 'en';
  const response = await fetch(`/console/i18n/${chosen}.json`, { credentials: 'same-origin' });
  messages = await response.json();
  current = chosen;
  document.documentElement.lang = chosen;
  return chosen;
}

// The message of `key`, with {name} placeholders filled from `params`.
export function t(key, params) {
  const message = messages[key] ?? key;
  if (!params) return message;
  return message.replace(/\{(\w+)\}/g, (whole, name) =>
    params[name] === undefined ? whole : String(params[name]),
  );
}

// The label of an enumeration value (outcomes, strategies): `enum.{kind}.{value}`, the
// value itself when the catalog has no label for it.
export function label(kind, value) {
  const key = `enum.${kind}.${value}`;
  return messages[key] ?? value;
}
