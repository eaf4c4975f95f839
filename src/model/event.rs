//! One event of containerd's event stream, as `watch` and `serve` keep it:
//! what happened to which task or record, and when. An event is a hint of
//! where to look, never evidence: findings come from a look at the node.

use serde::{Deserialize, Serialize};

use crate::model::cri_status::UnixNanos;

/// The topics asked for (containerd's `topic` filter, a regular
/// expression): task exits, deletes and OOMs, container and snapshot
/// removals, and 2.x's sandbox events.
pub const TOPICS: &str = "^/(tasks/(exit|delete|oom)|containers/delete|snapshot/remove|sandboxes/)";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// `/tasks/exit`, `/tasks/delete`, `/containers/delete`, ...
    pub topic: String,
    pub namespace: String,
    /// When containerd published it.
    pub published_at: UnixNanos,
    /// The container (for a sandbox's events, the sandbox) it is about.
    pub container_id: Option<String>,
    /// An exec's id; none (or the container's id) for the init process.
    pub exec_id: Option<String>,
    pub pid: Option<u32>,
    pub exit_status: Option<u32>,
    pub exited_at: Option<UnixNanos>,
}

impl Event {
    /// A container's (or sandbox's) init process exited: CRI's exit
    /// handler now runs `task.Delete`, and gives up after 10 s.
    pub fn is_init_exit(&self) -> bool {
        self.topic == "/tasks/exit"
            && self.container_id.is_some()
            && self
                .exec_id
                .as_deref()
                .is_none_or(|id| id.is_empty() || Some(id) == self.container_id.as_deref())
    }

    /// The metric label of its topic: `tasks/exit` and the like.
    pub fn topic_label(&self) -> &str {
        self.topic.trim_start_matches('/')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(container: &str, exec: &str) -> Event {
        Event {
            topic: "/tasks/exit".into(),
            container_id: Some(container.into()),
            exec_id: Some(exec.into()),
            ..Event::default()
        }
    }

    #[test]
    fn an_exec_s_exit_is_not_the_container_s() {
        assert!(exit("c1", "c1").is_init_exit());
        assert!(exit("c1", "").is_init_exit());
        assert!(!exit("c1", "exec-7").is_init_exit());
        let delete = Event {
            topic: "/tasks/delete".into(),
            ..exit("c1", "c1")
        };
        assert!(!delete.is_init_exit());
        assert_eq!(delete.topic_label(), "tasks/delete");
    }
}
