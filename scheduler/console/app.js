// The console's shell: who is logged in, the language, the navigation and the hash router
// (`#/jobs`, `#/runs/17`), which picks the page.

import { html, render, useEffect, useState } from './vendor/htm-preact-standalone.module.js';
import { api, get, put, whenSessionEnds } from './lib/api.js';
import { checkBook } from './lib/help.js';
import { LOCALES, browserLocale, loadLocale, t } from './lib/i18n.js';
import { currentUser, isAdmin, setCurrentUser } from './lib/session.js';
import { LoginPage } from './pages/login.js';
import { ResetPasswordPage } from './pages/reset_password.js';
import { DashboardPage } from './pages/dashboard.js';
import { JobsPage } from './pages/jobs.js';
import { JobFormPage } from './pages/job_form.js';
import { ScriptPage } from './pages/script.js';
import { RunsPage } from './pages/runs.js';
import { RunPage } from './pages/run.js';
import { ExecutorsPage } from './pages/executors.js';
import { AppsPage } from './pages/apps.js';
import { UsersPage } from './pages/users.js';
import { TokensPage } from './pages/tokens.js';
import { AuditPage } from './pages/audit.js';
import { ReplaysPage } from './pages/replays.js';
import { ShadowPage } from './pages/shadow.js';

// Path patterns to pages; `:name` parts become the page's props.
const ROUTES = [
  ['/', DashboardPage],
  ['/jobs', JobsPage],
  ['/jobs/new', JobFormPage],
  ['/jobs/:id', JobFormPage],
  ['/jobs/:id/copy', JobFormPage],
  ['/jobs/:id/script', ScriptPage],
  ['/runs', RunsPage],
  ['/runs/:logId', RunPage],
  ['/executors', ExecutorsPage],
  ['/apps', AppsPage],
  ['/replays', ReplaysPage],
  ['/shadow', ShadowPage],
  ['/audit', AuditPage],
  ['/users', UsersPage, 'admin'],
  ['/tokens', TokensPage],
];

const NAV = [
  ['/', 'nav.dashboard'],
  ['/jobs', 'nav.jobs'],
  ['/runs', 'nav.runs'],
  ['/executors', 'nav.executors'],
  ['/apps', 'nav.apps'],
  ['/replays', 'nav.replays'],
  ['/shadow', 'nav.shadow'],
  ['/audit', 'nav.audit'],
  ['/users', 'nav.users', 'admin'],
  ['/tokens', 'nav.tokens'],
];

// The current hash as {path, query}.
function readHash() {
  const raw = window.location.hash.replace(/^#/, '') || '/';
  const [path, search] = raw.split('?');
  return { path: path || '/', query: Object.fromEntries(new URLSearchParams(search ?? '')) };
}

function match(path) {
  const parts = path.split('/').filter(Boolean);
  for (const [pattern, page, only] of ROUTES) {
    const wanted = pattern.split('/').filter(Boolean);
    if (wanted.length !== parts.length) continue;
    const params = {};
    const fits = wanted.every((part, index) => {
      if (part.startsWith(':')) {
        params[part.slice(1)] = decodeURIComponent(parts[index]);
        return true;
      }
      return part === parts[index];
    });
    if (fits) return { page, params, only, copy: pattern.endsWith('/copy') };
  }
  return null;
}

export function navigate(path) {
  window.location.hash = `#${path}`;
}

function Shell({ route, onLocale, onLogout }) {
  const [menuOpen, setMenuOpen] = useState(false);
  const found = match(route.path);
  const user = currentUser();
  const current = (target) => (target === '/' ? route.path === '/' : route.path.startsWith(target));
  let page;
  if (!found || (found.only === 'admin' && !isAdmin())) {
    page = html`<section><h1>${t('common.not_found')}</h1></section>`;
  } else {
    const Page = found.page;
    page = html`<${Page} ...${found.params} query=${route.query} copy=${found.copy} key=${route.path} />`;
  }
  return html`
    <a class="skip" href="#main">${t('nav.skip')}</a>
    <header class="top">
      <button type="button" class="menu secondary" aria-expanded=${menuOpen} aria-controls="nav"
        onClick=${() => setMenuOpen(!menuOpen)}>${t('nav.menu')}</button>
      <a class="brand" href="#/">${t('nav.brand')}</a>
      <span class="spacer"></span>
      <label class="language">
        <span class="visually-hidden">${t('nav.language')}</span>
        <select id="language" value=${document.documentElement.lang} onChange=${(event) => onLocale(event.target.value)}>
          ${LOCALES.map((code) => html`<option value=${code}>${t(`language.${code}`)}</option>`)}
        </select>
      </label>
      <span class="who" title=${t(`enum.role.${user.role}`)}>${user.name}</span>
      <button type="button" id="logout" class="secondary" onClick=${onLogout}>${t('nav.logout')}</button>
    </header>
    <div class="layout">
      <nav id="nav" class=${menuOpen ? 'open' : ''} aria-label=${t('nav.label')}>
        <ul>
          ${NAV.filter(([, , only]) => only !== 'admin' || isAdmin()).map(
            ([target, key]) => html`<li><a href=${`#${target}`} aria-current=${current(target) ? 'page' : undefined}
              onClick=${() => setMenuOpen(false)}>${t(key)}</a></li>`,
          )}
        </ul>
      </nav>
      <main id="main" tabindex="-1">${page}</main>
    </div>
  `;
}

function App() {
  const [ready, setReady] = useState(false);
  const [user, setUser] = useState(null);
  const [route, setRoute] = useState(readHash());
  const [, setLocale] = useState('en');

  const signedIn = async (me) => {
    setCurrentUser(me);
    setLocale(await loadLocale(me.locale ?? browserLocale()));
    setUser(me);
  };

  useEffect(() => {
    const onHash = () => setRoute(readHash());
    window.addEventListener('hashchange', onHash);
    whenSessionEnds(() => {
      setCurrentUser(null);
      setUser(null);
    });
    (async () => {
      // Whether the book is served decides the help links; asked once, beside the session.
      const book = checkBook();
      try {
        await signedIn(await get('/api/auth/me'));
      } catch {
        setLocale(await loadLocale(browserLocale()));
      }
      await book;
      setReady(true);
    })();
    return () => window.removeEventListener('hashchange', onHash);
  }, []);

  // The choice is the user's: kept on their account, so it follows them to other browsers.
  const chooseLocale = async (next) => {
    setLocale(await loadLocale(next));
    if (currentUser()) {
      const updated = await put('/api/auth/me/locale', { locale: next });
      setCurrentUser(updated);
      setUser(updated);
    }
  };

  const logout = async () => {
    try {
      await api('POST', '/api/auth/logout', {});
    } finally {
      setCurrentUser(null);
      setUser(null);
    }
  };

  if (!ready) return null;
  // A reset token is redeemed without a session (an imported user has no password yet).
  if (route.path === '/reset-password') {
    return html`<${ResetPasswordPage} query=${route.query} key=${route.query.token ?? ''} />`;
  }
  if (!user) return html`<${LoginPage} onLogin=${signedIn} onLocale=${chooseLocale} />`;
  return html`<${Shell} route=${route} onLocale=${chooseLocale} onLogout=${logout} />`;
}

render(html`<${App} />`, document.getElementById('app'));
