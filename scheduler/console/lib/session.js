// Who is logged in, and what they may do: the API decides every call; this only leaves out
// the controls a user could not use.

const LEVELS = { VIEW: 1, OPERATE: 2, SCRIPTS: 3 };

let me = null;

export function currentUser() {
  return me;
}

export function setCurrentUser(user) {
  me = user;
}

export function isAdmin() {
  return me?.role === 'ADMIN';
}

// Whether the user may do what `access` (VIEW, OPERATE, SCRIPTS) allows on `app`.
export function can(app, access) {
  if (!me) return false;
  if (isAdmin()) return true;
  const grant = me.grants.find((candidate) => candidate.app === app);
  return Boolean(grant) && LEVELS[grant.access] >= LEVELS[access];
}

// Whether the user may operate at least one app (shows "new job" and the like).
export function canOperateSomewhere() {
  return isAdmin() || (me?.grants ?? []).some((grant) => LEVELS[grant.access] >= LEVELS.OPERATE);
}

// The apps the user may do `access` on, of `apps` (names).
export function appsWith(apps, access) {
  return apps.filter((app) => can(app, access));
}
