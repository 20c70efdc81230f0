//! Partition counts of the apps' trigger topics, which routing chooses among: read from the
//! store once per app and remembered; the API tells this directory of the apps it creates.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kadence_schemas::AppName;

use crate::store::{Jobs, StoreError};

/// Why an app's partition count is not known.
#[derive(Debug, thiserror::Error)]
pub enum PartitionsError {
    /// No app has this name.
    #[error("app {0} does not exist")]
    UnknownApp(AppName),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Partition counts of the apps' trigger topics, read from the store once per app.
pub struct PartitionDirectory {
    store: Arc<dyn Jobs>,
    known: RwLock<HashMap<AppName, i32>>,
}

impl PartitionDirectory {
    /// A directory backed by `store`.
    pub fn new(store: Arc<dyn Jobs>) -> Self {
        PartitionDirectory {
            store,
            known: RwLock::new(HashMap::new()),
        }
    }

    /// The partition count of `app`'s trigger topic.
    pub async fn partitions(&self, app: &AppName) -> Result<i32, PartitionsError> {
        if let Some(&count) = self.known.read().expect("directory lock").get(app) {
            return Ok(count);
        }
        match self.store.get_app(app).await? {
            Some(found) => {
                self.remember(app.clone(), found.partitions);
                Ok(found.partitions)
            }
            None => Err(PartitionsError::UnknownApp(app.clone())),
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
