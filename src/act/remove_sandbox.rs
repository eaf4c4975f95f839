//! Removing leaked sandboxes, through CRI, as kubelet does.
//!
//! Between the scan and the removal the sandbox may be started again
//! (Ready), get a container, or be removed by kubelet. So, right before
//! acting: re-gather CRI's lists, re-judge each sandbox on that fresh
//! snapshot with the check's own judgement ([`leaked_sandbox::leaked`]),
//! and only then call `StopPodSandbox` (which runs CNI DEL and removes the
//! network namespace) and `RemovePodSandbox`. CRI refuses a container in a
//! sandbox that is not ready, so none can appear between the verdict and
//! the call. Whatever CRI did not answer the second time is a refusal.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::act::walk::{walk, Act, PerLook};
use crate::act::Verdict;
use crate::checks::leaked_sandbox;
use crate::checks::Settings;
use crate::model::{Cleanup, CleanupAction, CleanupOutcome, Snapshot};

/// One leaked sandbox: its id and its pod (`namespace/name`), when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub sandbox_id: String,
    pub pod: Option<String>,
}

/// Every leaked sandbox of `snapshot`.
pub fn targets(snapshot: &Snapshot, settings: &Settings) -> Vec<Target> {
    leaked_sandbox::leaked(snapshot, settings)
        .into_iter()
        .map(|sandbox| Target {
            sandbox_id: sandbox.id.clone(),
            pod: match (&sandbox.namespace, &sandbox.name) {
                (Some(namespace), Some(name)) => Some(format!("{namespace}/{name}")),
                (None, Some(name)) => Some(name.clone()),
                _ => None,
            },
        })
        .collect()
}

/// Whether `target` may be removed now, judged on `fresh`.
pub fn verify(fresh: &Snapshot, target: &Target, settings: &Settings) -> Verdict {
    verify_among(fresh, target, &still_leaked(fresh, settings))
}

/// The ids of the sandboxes still leaked on `fresh`: the check's pass.
fn still_leaked(fresh: &Snapshot, settings: &Settings) -> HashSet<String> {
    leaked_sandbox::leaked(fresh, settings)
        .into_iter()
        .map(|sandbox| sandbox.id.clone())
        .collect()
}

/// [`verify`], with the check's pass over `fresh` made already.
fn verify_among(fresh: &Snapshot, target: &Target, leaked: &HashSet<String>) -> Verdict {
    let id = target.sandbox_id.as_str();
    if leaked.contains(id) {
        return Verdict::Go;
    }
    let Some(cri) = &fresh.cri else {
        return Verdict::Refuse("CRI was not asked, so nothing is confirmed".to_string());
    };
    let (Some(sandboxes), Some(_)) = (&cri.sandboxes, &cri.containers) else {
        return Verdict::Refuse("CRI's lists did not answer, so nothing is confirmed".to_string());
    };
    if !sandboxes.iter().any(|s| s.id == id) {
        return Verdict::Gone("CRI no longer lists it".to_string());
    }
    Verdict::Refuse("no longer leaked: it is ready again or holds a container".to_string())
}

/// Removes (or, without `act`, plans) the leaked sandboxes of `before`,
/// each re-verified on the snapshot `regather` takes; `remove` stops and
/// removes one sandbox through CRI.
pub fn run(
    before: &Snapshot,
    settings: &Settings,
    act: bool,
    regather: impl FnMut() -> Snapshot,
    remove: impl FnMut(&str) -> Result<(), String>,
) -> Vec<Cleanup> {
    let targets = targets(before, settings);
    walk(
        before,
        targets,
        act,
        &mut Remove {
            settings,
            remove,
            leaked: PerLook::default(),
        },
        regather,
    )
}

struct Remove<'a, F> {
    settings: &'a Settings,
    remove: F,
    leaked: PerLook<HashSet<String>>,
}

impl<F: FnMut(&str) -> Result<(), String>> Act for Remove<'_, F> {
    type Target = Target;
    type Outcome = CleanupOutcome;
    type Row = Cleanup;

    fn verdict(&self, fresh: &Snapshot, target: &Target) -> Verdict {
        let leaked = self.leaked.of(fresh, || still_leaked(fresh, self.settings));
        verify_among(fresh, target, &leaked)
    }

    fn would(&self, _: &Target) -> (CleanupOutcome, String) {
        let how = "run with --remove --yes to stop and remove it through CRI";
        (CleanupOutcome::WouldRemove, how.to_string())
    }

    fn act(&mut self, target: &Target) -> (CleanupOutcome, String) {
        match (self.remove)(&target.sandbox_id) {
            Ok(()) => (
                CleanupOutcome::Removed,
                "stopped (network torn down) and removed".to_string(),
            ),
            Err(err) => (CleanupOutcome::Failed, err),
        }
    }

    fn record(
        &self,
        target: Target,
        outcome: CleanupOutcome,
        detail: String,
        _: &Snapshot,
    ) -> Cleanup {
        Cleanup {
            action: CleanupAction::RemoveSandbox,
            path: PathBuf::from(target.pod.as_deref().unwrap_or(&target.sandbox_id)),
            id: target.sandbox_id,
            outcome,
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{CriApiState, CriItem, CriView};

    const HOUR: i64 = 3600 * SEC;

    fn not_ready(which: char) -> CriItem {
        CriItem {
            state: CriApiState::SandboxNotReady,
            created_at: Some(NOW - HOUR),
            ..cri_sandbox(&id(which), "shop", "cart")
        }
    }

    fn node(sandboxes: Vec<CriItem>, containers: Vec<CriItem>) -> Snapshot {
        let mut s = snapshot();
        s.cri = Some(CriView {
            sandboxes: Some(sandboxes),
            containers: Some(containers),
            ..CriView::default()
        });
        of_proven_daemon(s)
    }

    fn outcomes(before: &Snapshot, fresh: Snapshot, act: bool) -> (Vec<Cleanup>, Vec<String>) {
        let mut removed = Vec::new();
        let done = run(
            before,
            &Settings::default(),
            act,
            || fresh.clone(),
            |id| {
                removed.push(id.to_string());
                Ok(())
            },
        );
        (done, removed)
    }

    #[test]
    fn a_dry_run_plans_and_yes_removes_what_is_still_leaked() {
        let s = node(vec![not_ready('a')], vec![]);
        let (done, removed) = outcomes(&s, s.clone(), false);
        assert_eq!(done[0].outcome, CleanupOutcome::WouldRemove);
        assert!(removed.is_empty());
        let (done, removed) = outcomes(&s, s.clone(), true);
        assert_eq!(done[0].outcome, CleanupOutcome::Removed);
        assert_eq!(done[0].action, CleanupAction::RemoveSandbox);
        assert_eq!(done[0].path, PathBuf::from("shop/cart"));
        assert_eq!(removed, [id('a')]);
    }

    #[test]
    fn a_sandbox_ready_again_holding_a_container_gone_or_unanswered_is_not_removed() {
        let before = node(vec![not_ready('a')], vec![]);
        let ready = CriItem {
            state: CriApiState::SandboxReady,
            ..not_ready('a')
        };
        let with_container = node(
            vec![not_ready('a')],
            vec![cri_container(
                &id('c'),
                &id('a'),
                "app",
                CriApiState::ContainerCreated,
            )],
        );
        let mut unanswered = node(vec![not_ready('a')], vec![]);
        unanswered.cri.as_mut().unwrap().containers = None;
        for (fresh, outcome) in [
            (node(vec![ready], vec![]), CleanupOutcome::Refused),
            (with_container, CleanupOutcome::Refused),
            (node(vec![], vec![]), CleanupOutcome::AlreadyGone),
            (unanswered, CleanupOutcome::Refused),
        ] {
            let (done, removed) = outcomes(&before, fresh, true);
            assert_eq!(done[0].outcome, outcome, "{done:?}");
            assert!(removed.is_empty());
        }
    }

    #[test]
    fn a_failed_removal_says_why() {
        let s = node(vec![not_ready('a')], vec![]);
        let done = run(
            &s,
            &Settings::default(),
            true,
            || s.clone(),
            |_| Err("StopPodSandbox: failed to destroy network".to_string()),
        );
        assert_eq!(done[0].outcome, CleanupOutcome::Failed);
        assert!(done[0].detail.contains("failed to destroy network"));
    }
}
