//! Static schedulers: every model has one processor, fixed before run time,
//! whatever the scene. Requests are batched with the sync timer at the
//! model's preferred sizes, so the comparison isolates the mapping.

use crate::heft_dag::TaskGraph;
use crate::scheduler::{Batching, Scheduler};
use crate::spec::ProcessorKind;
use crate::{preferred_fitting, Cluster, ModelId, Plan, ProcId, System};

/// A fixed model -> processor mapping.
#[derive(Clone, Debug)]
pub struct Fixed {
    name: String,
    host: Vec<ProcId>,
    wait_ms: f64,
    owns_board: bool,
}

impl Fixed {
    /// Every model on the first processor of `kind` that supports it (the
    /// fastest supporting one otherwise, e.g. a CPU-only detector).
    pub fn only(system: &System, kind: ProcessorKind, wait_ms: f64) -> Self {
        let host = system
            .model_ids()
            .map(|i| {
                system
                    .supporting(i)
                    .find(|&j| system.processors[j.0].kind == kind)
                    .or_else(|| fastest_where(system, i, |_| true))
                    .expect("a validated model has a supporting processor")
            })
            .collect();
        let name = format!("{}-only", format!("{kind:?}").to_lowercase());
        Fixed {
            name,
            host,
            wait_ms,
            owns_board: true,
        }
    }

    /// Static-DIST: the content-unaware mapping classic HEFT gives the model
    /// graph with one request per model (execution times and precedence only).
    pub fn static_dist(system: &System, wait_ms: f64) -> Self {
        let graph = TaskGraph {
            cost: system
                .model_ids()
                .map(|i| system.proc_ids().map(|j| system.exec_ms(i, j, 1)).collect())
                .collect(),
            edges: system
                .model_ids()
                .filter_map(|i| system.models[i.0].parent.map(|p| (p.0, i.0, 0.0)))
                .collect(),
        };
        let mut host: Vec<ProcId> = graph.heft().proc.into_iter().map(ProcId).collect();
        // Respect N_j: move overflowing models to their next-best processor.
        for j in system.proc_ids() {
            let mut on_j: Vec<ModelId> = system.model_ids().filter(|i| host[i.0] == j).collect();
            on_j.sort_by(|a, b| {
                system
                    .exec_ms(*a, j, 1)
                    .total_cmp(&system.exec_ms(*b, j, 1))
            });
            for &i in on_j.iter().skip(system.processors[j.0].max_resident) {
                if let Some(alt) = fastest_where(system, i, |q| {
                    q != j
                        && system.model_ids().filter(|m| host[m.0] == q).count()
                            < system.processors[q.0].max_resident
                }) {
                    host[i.0] = alt;
                }
            }
        }
        Fixed {
            name: "static-dist".into(),
            host,
            wait_ms,
            owns_board: false,
        }
    }

    /// The processor of model i.
    pub fn host(&self, i: ModelId) -> ProcId {
        self.host[i.0]
    }
}

/// The processor among those supporting model i and passing `ok` that runs
/// one request of it fastest.
fn fastest_where(system: &System, i: ModelId, ok: impl Fn(ProcId) -> bool) -> Option<ProcId> {
    system.supporting(i).filter(|&j| ok(j)).min_by(|a, b| {
        system
            .exec_ms(i, *a, 1)
            .total_cmp(&system.exec_ms(i, *b, 1))
    })
}

impl Scheduler for Fixed {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn batching(&self) -> Batching {
        Batching::SyncTimer {
            wait_ms: self.wait_ms,
        }
    }

    fn batch_target(&self, system: &System, _cluster: &Cluster, i: ModelId) -> usize {
        system
            .preferred_batches(i, self.host[i.0])
            .first()
            .map_or(1, |&k| k as usize)
    }

    fn system_override(&self, system: &System) -> Option<System> {
        self.owns_board.then(|| {
            system.proc_ids().fold(system.clone(), |s, j| {
                let mapped = system.model_ids().filter(|i| self.host[i.0] == j).count();
                let n = system.processors[j.0].max_resident.max(mapped);
                s.with_max_resident(j, n)
            })
        })
    }

    fn initial_plan(&mut self, system: &System) -> Plan {
        let mut plan = Plan::empty(system);
        for i in system.model_ids() {
            plan.set_resident(i, self.host[i.0], true);
        }
        plan
    }

    fn place(
        &mut self,
        system: &System,
        cluster: &Cluster,
        _now: f64,
        i: ModelId,
        waiting: usize,
    ) -> Option<(ProcId, usize)> {
        // A host whose every slot holds a pinned detector cannot take its
        // model (a board with fewer slots than models): the fastest unit that
        // can host it runs it instead of the frame failing.
        let can_host = |j| cluster.can_host(system, i, j);
        let j = Some(self.host[i.0])
            .filter(|&j| can_host(j))
            .or_else(|| fastest_where(system, i, can_host))?;
        Some((j, preferred_fitting(system, i, j, waiting)))
    }
}
