//! Who the client of a request is, by network address: what failed logins are counted under
//! (`throttle`) and what the per-address limit on the public routes counts.
//!
//! [`client_address`] is the one place that decides. The connection's peer is the client,
//! unless the peer is one of `api.trusted_proxies`: then each proxy has appended the address
//! it received the request from to `X-Forwarded-For`, and the client is the last address
//! there that no trusted proxy holds. Without trusted proxies the header is ignored, since any
//! client can write it; only `X-Forwarded-For` is read (not `Forwarded`), as it is what nginx,
//! HAProxy and the cloud load balancers append, and a header the proxy does not write is one
//! the client could.
//!
//! Whether the browser came over HTTPS ([`came_over_https`], for the session cookie's
//! `Secure` flag) is decided the same way: `kadence serve` speaks plain HTTP, so only a
//! trusted proxy (which ends TLS) can say so, in the `X-Forwarded-Proto` it writes; the value
//! the nearest proxy wrote (the last, if several were appended) is believed. From any other
//! peer the header is ignored and the answer is no, the connection's own scheme.
//!
//! A request from a peer that is no trusted proxy but sends `X-Forwarded-For` is logged once
//! per node as a warning: most likely a proxy someone forgot to list, which makes every
//! client behind it one address, sharing its login waits and its share of the public routes.
//!
//! [`identify`] runs in front of every API route and leaves the answers in the request as a
//! [`ClientAddress`] and a [`CameOverHttps`], which handlers take as extractors.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use crate::config::TrustedProxies;

/// The header each proxy appends the address it received the request from to.
const FORWARDED_FOR: &str = "x-forwarded-for";
/// The header a proxy that ends TLS says the client's scheme in.
const FORWARDED_PROTO: &str = "x-forwarded-proto";

/// Whether the warning about an unlisted proxy was logged (once per process is enough).
static UNTRUSTED_FORWARDING_LOGGED: AtomicBool = AtomicBool::new(false);

/// The client's IP address: `None` when the server was started without connection info (a
/// router driven in-process; `kadence serve` always has it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ClientAddress(pub(super) Option<IpAddr>);

/// Whether the browser came over HTTPS, as the proxy in front said: the session cookie is
/// then `Secure`. Always false without connection info (a router driven in-process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CameOverHttps(pub(super) bool);

/// The client of a request that came from `peer` with `headers` (see the module docs).
pub(super) fn client_address(
    peer: IpAddr,
    headers: &HeaderMap,
    trusted: &TrustedProxies,
) -> IpAddr {
    let mut client = peer.to_canonical();
    if !trusted.contains(client) {
        if headers.contains_key(FORWARDED_FOR)
            && !UNTRUSTED_FORWARDING_LOGGED.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                peer = %client,
                "a request came with X-Forwarded-For from an address not in \
                 api.trusted_proxies: the header is ignored; if that address is a proxy of \
                 yours, list it, or every client behind it counts as that one address"
            );
        }
        return client;
    }
    // Several headers are one list, in order; the nearest hop is last.
    let hops: Vec<&str> = headers
        .get_all(FORWARDED_FOR)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .collect();
    for hop in hops.into_iter().rev() {
        let hop = hop.trim();
        // Some proxies write a port too; anything else unreadable ends what can be believed.
        let Some(address) = (hop.parse::<IpAddr>().ok())
            .or_else(|| hop.parse::<SocketAddr>().ok().map(|address| address.ip()))
        else {
            break;
        };
        client = address.to_canonical();
        if !trusted.contains(client) {
            break;
        }
    }
    client
}

/// Whether a request from `peer` with `headers` came over HTTPS (see the module docs).
pub(super) fn came_over_https(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> bool {
    if !trusted.contains(peer) {
        return false;
    }
    (headers.get_all(FORWARDED_PROTO).iter())
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .next_back()
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

/// Puts the request's [`ClientAddress`] and [`CameOverHttps`] into it, for the layers and
/// handlers after this one.
pub(super) async fn identify(
    State(trusted): State<Arc<TrustedProxies>>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = (request.extensions())
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip());
    let headers = request.headers();
    let client = peer.map(|peer| client_address(peer, headers, &trusted));
    let https = peer.is_some_and(|peer| came_over_https(peer, headers, &trusted));
    request.extensions_mut().insert(ClientAddress(client));
    request.extensions_mut().insert(CameOverHttps(https));
    next.run(request).await
}

impl<S: Send + Sync> FromRequestParts<S> for ClientAddress {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        // Put there by `identify`, in front of every API route.
        Ok((parts.extensions.get::<ClientAddress>().copied()).unwrap_or(ClientAddress(None)))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for CameOverHttps {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        // Put there by `identify`, in front of every API route.
        Ok((parts.extensions.get::<CameOverHttps>().copied()).unwrap_or(CameOverHttps(false)))
    }
}

/// The requests in flight per client address, each at most `per_address`: so that one
/// address cannot take the whole budget of the public routes. An address is tracked only
/// while it has a request in flight.
#[derive(Debug)]
pub(super) struct AddressSlots {
    per_address: usize,
    in_flight: Mutex<HashMap<IpAddr, usize>>,
}

/// One request's place among its address's; given back when dropped.
struct Slot {
    slots: Arc<AddressSlots>,
    address: IpAddr,
}

impl AddressSlots {
    pub(super) fn new(per_address: usize) -> Self {
        AddressSlots {
            per_address: per_address.max(1),
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// A place for one more request from `address`, if it has one left.
    fn take(self: &Arc<Self>, address: IpAddr) -> Option<Slot> {
        let mut in_flight = self.lock();
        let count = in_flight.entry(address).or_insert(0);
        if *count >= self.per_address {
            return None;
        }
        *count += 1;
        Some(Slot {
            slots: Arc::clone(self),
            address,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        (self.in_flight.lock()).unwrap_or_else(|poison| poison.into_inner())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut in_flight = self.slots.lock();
        if let Some(count) = in_flight.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.address);
            }
        }
    }
}

/// The layer of the public routes that holds each address to its share: a request beyond it
/// is answered 429 with `Retry-After` at once.
pub(super) async fn within_address_share(
    State(slots): State<Arc<AddressSlots>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(ClientAddress(Some(address))) = request.extensions().get::<ClientAddress>().copied()
    else {
        return next.run(request).await;
    };
    let Some(_slot) = slots.take(address) else {
        return ApiError::TooManyRequests {
            message: format!(
                "too many requests from {address} at once: wait for an answer before sending \
                 the next"
            ),
            retry_after_secs: 1,
        }
        .into_response();
    };
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn forwarded(hops: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for hop in hops {
            headers.append(FORWARDED_FOR, HeaderValue::from_str(hop).unwrap());
        }
        headers
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn the_peer_is_the_client_unless_it_is_a_trusted_proxy() {
        let none = TrustedProxies::default();
        let proxies = TrustedProxies::parse(&["10.0.0.0/8"]).unwrap();
        let spoofed = forwarded(&["6.6.6.6"]);
        assert_eq!(
            client_address(ip("203.0.113.9"), &spoofed, &none),
            ip("203.0.113.9"),
            "without trusted proxies the header is ignored"
        );
        assert_eq!(
            client_address(ip("203.0.113.9"), &spoofed, &proxies),
            ip("203.0.113.9"),
            "a peer that is no trusted proxy is the client, whatever it writes"
        );
        assert_eq!(
            client_address(ip("::ffff:203.0.113.9"), &HeaderMap::new(), &none),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn behind_trusted_proxies_the_client_is_the_last_address_no_proxy_holds() {
        let proxies = TrustedProxies::parse(&["10.0.0.0/8"]).unwrap();
        // The client wrote 6.6.6.6 itself; the first proxy appended the client's address,
        // the second the first proxy's.
        let headers = forwarded(&["6.6.6.6, 198.51.100.4", "10.1.1.1"]);
        assert_eq!(
            client_address(ip("10.2.2.2"), &headers, &proxies),
            ip("198.51.100.4")
        );
        assert_eq!(
            client_address(
                ip("10.2.2.2"),
                &forwarded(&["198.51.100.4:51234"]),
                &proxies
            ),
            ip("198.51.100.4"),
            "a port is dropped"
        );
        assert_eq!(
            client_address(ip("10.2.2.2"), &forwarded(&["junk, 10.1.1.1"]), &proxies),
            ip("10.1.1.1"),
            "an unreadable hop ends what is believed"
        );
        assert_eq!(
            client_address(ip("10.2.2.2"), &HeaderMap::new(), &proxies),
            ip("10.2.2.2"),
            "a proxy's own request"
        );
    }

    #[test]
    fn only_a_trusted_proxy_says_the_browser_came_over_https() {
        let proxies = TrustedProxies::parse(&["10.0.0.0/8"]).unwrap();
        let mut https = HeaderMap::new();
        https.insert(FORWARDED_PROTO, HeaderValue::from_static("HTTPS"));
        assert!(came_over_https(ip("10.2.2.2"), &https, &proxies));
        assert!(
            !came_over_https(ip("203.0.113.9"), &https, &proxies),
            "a client writes what it likes"
        );
        assert!(
            !came_over_https(ip("10.2.2.2"), &https, &TrustedProxies::default()),
            "without trusted proxies the header is ignored"
        );
        assert!(
            !came_over_https(ip("10.2.2.2"), &HeaderMap::new(), &proxies),
            "a proxy that says nothing: the connection itself, plain HTTP"
        );
        let mut appended = HeaderMap::new();
        appended.insert(FORWARDED_PROTO, HeaderValue::from_static("https, http"));
        assert!(
            !came_over_https(ip("10.2.2.2"), &appended, &proxies),
            "the nearest proxy's word counts"
        );
        appended.append(FORWARDED_PROTO, HeaderValue::from_static("https"));
        assert!(came_over_https(ip("::ffff:10.2.2.2"), &appended, &proxies));
    }

    #[test]
    fn an_address_holds_at_most_its_share_and_gets_it_back() {
        let slots = Arc::new(AddressSlots::new(2));
        let (a, b) = (ip("192.0.2.1"), ip("192.0.2.2"));
        let first = slots.take(a).expect("a first place");
        let second = slots.take(a).expect("a second place");
        assert!(slots.take(a).is_none(), "no third");
        assert!(slots.take(b).is_some(), "another address has its own");
        drop(first);
        let third = slots.take(a).expect("a place given back is free again");
        drop((second, third));
        assert!(slots.lock().is_empty(), "an idle address is forgotten");
    }
}
