//! A list of IP networks in the configuration: each entry an address (`10.1.2.3`, one host)
//! or a CIDR range (`10.20.0.0/16`). The API's trusted proxies and the networks alarm
//! webhooks may reach are such lists.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// IP networks, from a list of addresses and CIDR ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct IpNetworks(Vec<IpNet>);

impl IpNetworks {
    /// Each of `entries` as an address or a CIDR range; an error naming the first that is
    /// neither.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<IpNetworks, String> {
        entries
            .iter()
            .map(|entry| {
                let entry = entry.as_ref().trim();
                entry
                    .parse::<IpNet>()
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        format!(
                            "{entry:?} is neither an IP address nor a CIDR range such as \
                             10.20.0.0/16"
                        )
                    })
            })
            .collect::<Result<_, _>>()
            .map(IpNetworks)
    }

    /// Whether one of the networks holds `address`; an IPv4 address a dual-stack socket shows
    /// as IPv6 (`::ffff:10.0.0.1`) is taken as the IPv4 address it is.
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.0.iter().any(|network| network.contains(&address))
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<IpNetworks> for Vec<String> {
    fn from(networks: IpNetworks) -> Vec<String> {
        networks.0.iter().map(ToString::to_string).collect()
    }
}

impl TryFrom<Vec<String>> for IpNetworks {
    type Error = String;

    fn try_from(entries: Vec<String>) -> Result<Self, Self::Error> {
        IpNetworks::parse(&entries)
    }
}
