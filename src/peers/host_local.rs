//! host-local's ranges as host-local reads them (plugins/ipam/host-local's
//! `allocator.Range.Canonicalize`): how many addresses a network's IPAM
//! section gives out, for the report's use of each range.

use std::net::IpAddr;

use crate::peers::go_json::GoJson;

/// How many addresses host-local can give out: per range, from
/// `rangeStart` (default: the subnet's first host) to `rangeEnd` (default:
/// its last, the broadcast address excluded for IPv4), less the gateway
/// (default: the first host) when it falls inside. `None` when a range
/// cannot be read. Its keys as host-local's Go structs read them (any
/// case, the last).
pub fn capacity(ipam: &GoJson) -> Option<u64> {
    let ranges: Vec<&GoJson> = match ipam.last_field("ranges") {
        Some(GoJson::Array(sets)) => sets
            .iter()
            .flat_map(|set| match set {
                GoJson::Array(ranges) => ranges.iter().collect(),
                _ => Vec::new(),
            })
            .collect(),
        // The older form: one range, in the IPAM section itself.
        None if ipam.string_field("subnet").is_some() => vec![ipam],
        _ => return None,
    };
    ranges
        .iter()
        .map(|range| range_size(range))
        .sum::<Option<u128>>()
        .map(|n| u64::try_from(n).unwrap_or(u64::MAX))
}

fn range_size(range: &GoJson) -> Option<u128> {
    let (address, prefix) = range.string_field("subnet")?.split_once('/')?;
    let address: IpAddr = address.parse().ok()?;
    let prefix: u32 = prefix.parse().ok()?;
    let (bits, value) = match address {
        IpAddr::V4(v4) => (32, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (128, u128::from(v6)),
    };
    if prefix > bits {
        return None;
    }
    let size = 1u128.checked_shl(bits - prefix).unwrap_or(0);
    let network = if size == 0 { 0 } else { value & !(size - 1) };
    let last = network.wrapping_add(size.wrapping_sub(1));
    let at = |key: &str| -> Option<Option<u128>> {
        match range.string_field(key) {
            None => Some(None),
            Some(ip) => Some(Some(match ip.parse::<IpAddr>().ok()? {
                IpAddr::V4(v4) => u128::from(u32::from(v4)),
                IpAddr::V6(v6) => u128::from(v6),
            })),
        }
    };
    let start = at("rangeStart")?.unwrap_or(network + 1);
    let broadcast_excluded = if bits == 32 { last - 1 } else { last };
    let end = at("rangeEnd")?.unwrap_or(broadcast_excluded);
    if end < start {
        return Some(0);
    }
    let gateway = at("gateway")?.unwrap_or(network + 1);
    let gateway_inside = u128::from((start..=end).contains(&gateway));
    Some(end - start + 1 - gateway_inside)
}

#[cfg(test)]
mod tests {
    use crate::peers::libcni;
    use serde_json::{json, Value};

    fn capacity(ipam: &Value) -> Option<u64> {
        super::capacity(&libcni::parse(ipam.to_string().as_bytes()).unwrap())
    }

    #[test]
    fn capacity_is_the_range_less_network_broadcast_and_gateway() {
        // The measured /29: five pods got .2 to .6, the sixth none.
        let ipam = json!({"type": "host-local", "ranges": [[{"subnet": "10.251.0.0/29"}]]});
        assert_eq!(capacity(&ipam), Some(5));
        // The older form, the subnet in the IPAM section itself.
        let legacy = json!({"type": "host-local", "subnet": "10.88.0.0/16"});
        assert_eq!(capacity(&legacy), Some(65_536 - 3));
        // A range narrowed by start and end, the gateway outside it.
        let narrowed = json!({"ranges": [[{
            "subnet": "10.0.0.0/24", "rangeStart": "10.0.0.100", "rangeEnd": "10.0.0.109"
        }]]});
        assert_eq!(capacity(&narrowed), Some(10));
        // Dual stack: both ranges' addresses.
        let dual = json!({"ranges": [[{"subnet": "10.0.0.0/30"}], [{"subnet": "fd00::/126"}]]});
        assert_eq!(capacity(&dual), Some(1 + 2));
        // What cannot be read says so.
        assert_eq!(
            capacity(&json!({"ranges": [[{"subnet": "nonsense"}]]})),
            None
        );
        assert_eq!(capacity(&json!({"type": "host-local"})), None);
    }
}
