//! Partition counts of the apps' trigger topics, which routing chooses among: read from the
//! store once per app and remembered; the API tells this directory of the apps it creates.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kadence_schemas::AppName;

use crate::store::Store;

/// Partition counts of the apps' trigger topics, read from the store once per app.
pub struct PartitionDirectory {
    store: Arc<dyn Store>,
    known: RwLock<HashMap<AppName, i32>>,
}

impl PartitionDirectory {
    /// A directory backed by `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        PartitionDirectory {
            store,
            known: RwLock::new(HashMap::new()),
        }
    }

    /// The partition count of `app`'s trigger topic.
    pub async fn partitions(&self, app: &AppName) -> Result<i32, String> {
        if let Some(&count) = self.known.read().expect("directory lock").get(app) {
            return Ok(count);
        }
        match self.store.get_app(app).await {
            Ok(Some(found)) => {
                self.remember(app.clone(), found.partitions);
                Ok(found.partitions)
            }
            Ok(None) => Err(format!("app {app} does not exist")),
            Err(error) => Err(error.to_string()),
        }
    }

    /// Records a partition count (on app creation and at start-up).
    pub fn remember(&self, app: AppName, partitions: i32) {
        self.known
            .write()
            .expect("directory lock")
            .insert(app, partitions);
    }
}
