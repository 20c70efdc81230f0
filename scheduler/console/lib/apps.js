// The apps the user may see, for the app filters and pickers of every page (at most the
// API's largest page: a console with more apps than that filters by typing).

import { get } from './api.js';

let cached = null;

export async function visibleApps(refresh = false) {
  if (!cached || refresh) {
    cached = get('/api/apps', { limit: 1000 })
      .then((page) => page.items)
      .catch((error) => {
        cached = null;
        throw error;
      });
  }
  return cached;
}
