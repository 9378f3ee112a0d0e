//! The global step itself: audit the last step's choices, build this
//! step's candidates, replay each and keep the best.

use super::choice::Choice;
use super::follow::{Follow, Mode};
use super::record::{Audit, Probe, TrackRecord};
use super::replay::{lookahead, mean_scene, replay, replay_config, score_choice, Score};
use super::residency::{
    beats, detector_home, keep_idle_residents, stay_split, stream_residency_with,
};
use super::tuning::Tuning;
use crate::admission::FrameAdmission;
use crate::epoch::EpochScenes;
use crate::mlp::search::Search;
use crate::schedulers::Fixed;
use crate::sim::default_deadline_ms;
use crate::{repair, Cluster, Detector, GlobalPolicy, HostRule, Plan, PlanInput, System};

/// The global step's own state, moved into the job that computes a step
/// and back when it is applied, so the step can run on another thread
/// while the dispatcher goes on.
pub(super) struct Planner<G> {
    pub(super) global: G,
    pub(super) tuning: Tuning,
    /// The windows of the last epochs, oldest first, each padded to the
    /// epoch's offered frames: what a choice is replayed on.
    pub(super) history: Vec<Vec<Vec<u32>>>,
    /// When the last global step ran, ms (0 before the first).
    last_epoch_ms: f64,
    /// Every choice of the last step as it would have started, to be
    /// replayed on the epoch that followed.
    audit: Option<Audit>,
    /// Each choice's out-of-sample record from those audits.
    record: TrackRecord,
    /// The choice the last step kept.
    chosen: Option<Choice>,
}

/// Everything a global step decides on, taken when it starts: the board,
/// the cluster and the dispatcher as they stood, and the frames since the
/// last step.
pub(super) struct StepInput {
    pub(super) system: System,
    pub(super) cluster: Cluster,
    pub(super) follow: Follow,
    pub(super) window: Vec<Vec<u32>>,
    pub(super) now: f64,
    pub(super) scene: Vec<u32>,
    pub(super) frames_per_epoch: f64,
    pub(super) epoch_ms: f64,
    pub(super) admission: FrameAdmission,
    pub(super) delivered: Vec<Option<f64>>,
}

/// What a global step chose: the kind of choice, the residency to load (if
/// any), the dispatcher's mode and the plan it follows with that plan's
/// makespan, ms.
pub(super) struct StepChoice {
    pub(super) choice: Choice,
    pub(super) load: Option<Plan>,
    pub(super) mode: Mode,
    pub(super) plan: Option<(Plan, f64)>,
}

/// One candidate of a step: its kind, the residency to load (if any), the
/// dispatcher's mode and the plan it follows (if any).
struct Candidate {
    choice: Choice,
    load: Option<Plan>,
    mode: Mode,
    plan: Option<Plan>,
}

impl<G: GlobalPolicy> Planner<G> {
    /// A planner with no history that plans with `global`.
    pub(super) fn new(global: G, tuning: Tuning) -> Self {
        Planner {
            global,
            record: TrackRecord::new(&tuning),
            tuning,
            history: Vec::new(),
            last_epoch_ms: 0.0,
            audit: None,
            chosen: None,
        }
    }

    /// Decides a global step on what it was given: the audit of the last
    /// step's choices, then every candidate replayed and the best kept.
    pub(super) fn decide(&mut self, input: &mut StepInput) -> Option<StepChoice> {
        let window = std::mem::take(&mut input.window);
        let delivered = std::mem::take(&mut input.delivered);
        let (observed, epoch_frames) = self.remember(window, input.frames_per_epoch);
        self.audit_last_step(input, observed, epoch_frames, &delivered);
        let StepInput {
            system,
            cluster,
            follow: f,
            now,
            scene,
            frames_per_epoch,
            epoch_ms,
            admission,
            ..
        } = input;
        let (system, cluster, now, scene) = (&*system, &*cluster, *now, scene.as_slice());
        let window: Vec<Vec<u32>> = self.history.concat();
        let rem = cluster.rem_all(now);
        let residency = cluster.residency().to_vec();
        let plan_input = PlanInput {
            scene,
            rem_ms: &rem,
            residency: &residency,
            frames_per_epoch: *frames_per_epoch,
        };
        // The frame period, from the epoch's length and its frames.
        let period = (now - self.last_epoch_ms) / frames_per_epoch.max(1.0);
        self.last_epoch_ms = now;
        let ahead = lookahead(
            system,
            scene,
            *epoch_ms,
            period,
            *frames_per_epoch,
            &self.tuning,
        );
        let (new, stay, mut candidates) =
            self.candidates(system, f, &plan_input, &window, &ahead, period);
        if candidates.is_empty() {
            return None;
        }
        let incumbent = Choice::of_mode(f.mode);
        let choice = if window.is_empty() || period <= 0.0 || !period.is_finite() {
            match (&new, &stay) {
                (Some(new), Some(stay)) if !beats(system, &plan_input, new, stay, period) => {
                    incumbent.max(Choice::StayPlan)
                }
                (Some(_), _) => Choice::Plan,
                (None, _) => incumbent,
            }
        } else {
            let replays = Replays {
                system,
                cluster,
                follow: f,
                input: &plan_input,
                now,
                window: &window,
                ahead: &ahead,
                cfg: replay_config(period, *admission),
            };
            self.choose(&replays, &mut candidates, incumbent)
        };
        let c = candidates.into_iter().find(|c| c.choice == choice)?;
        self.chosen = Some(choice);
        let det = Detector::fastest(system);
        let plan = c.plan.map(|p| {
            let makespan = p.makespan_ms(system, &plan_input, det);
            (p, makespan)
        });
        Some(StepChoice {
            choice,
            load: c.load,
            mode: c.mode,
            plan,
        })
    }

    /// Keeps the epoch's window (its observed scenes spread over the frames
    /// offered, the first [`Tuning::replay_frames`] of them) in the history;
    /// returns whether any frame was observed and the epoch's frames before
    /// the cap.
    fn remember(&mut self, mut window: Vec<Vec<u32>>, frames_per_epoch: f64) -> (bool, usize) {
        // Frames dropped before their detector ran were never observed:
        // each observed scene stands for its share of the epoch's frames.
        let offered = frames_per_epoch.round() as usize;
        if !window.is_empty() && window.len() < offered {
            window = (0..offered)
                .map(|k| window[k * window.len() / offered].clone())
                .collect();
        }
        let observed = !window.is_empty();
        let epoch_frames = window.len();
        window.truncate(self.tuning.replay_frames);
        if observed {
            self.history.push(window);
            if self.history.len() > self.tuning.history_epochs {
                self.history.remove(0);
            }
        }
        (observed, epoch_frames)
    }

    /// Out of sample: what each choice of the last step did on the epoch
    /// that followed it (the last history entry), from that step's state;
    /// and whether the kept choice delivered what its replay said. Nothing
    /// when no frame of that epoch was `observed` (the last history entry
    /// is an older one); the audit is spent either way.
    fn audit_last_step(
        &mut self,
        input: &StepInput,
        observed: bool,
        epoch_frames: usize,
        delivered: &[Option<f64>],
    ) {
        let audit = self.audit.take();
        let (Some(audit), Some(epoch), true) = (audit, self.history.last(), observed) else {
            return;
        };
        let system = &input.system;
        let period = (input.now - audit.at_ms) / epoch_frames.max(1) as f64;
        let cfg = replay_config(period, input.admission);
        let mut on_time: [Option<f64>; Choice::COUNT] = [None; Choice::COUNT];
        for probe in audit.probes {
            let Probe {
                choice,
                mut follow,
                cluster,
                same_as,
            } = probe;
            if let Some(n) = same_as.and_then(|t| on_time[t.index()]) {
                on_time[choice.index()] = Some(n);
            } else if let Some(score) =
                replay(system, &mut follow, cluster, audit.at_ms, epoch, &cfg)
            {
                on_time[choice.index()] = Some(score.on_time as f64);
            }
        }
        // What the kept choice delivered: when it fell far short of its
        // own replay on the same frames, the replays misjudge that kind.
        if let Some(c) = self.chosen {
            let deadline = default_deadline_ms(cfg.fps);
            if let (Some(predicted), false) = (on_time[c.index()], delivered.is_empty()) {
                let share = delivered
                    .iter()
                    .flatten()
                    .filter(|&&d| d <= deadline)
                    .count() as f64
                    / delivered.len() as f64;
                let predicted_share = predicted / epoch.len().max(1) as f64;
                if share < predicted_share - self.tuning.reality_gap {
                    self.record.misjudge(c);
                }
            }
        }
        // A choice not offered at that step counts as the default did.
        if let Some(default) = on_time[Choice::DEFAULT.index()] {
            self.record.add(
                on_time.map(|n| n.unwrap_or(default)),
                epoch.len(),
                input.now - audit.at_ms,
                input.epoch_ms,
            );
        }
    }

    /// The step's candidates, with the policy's plan and the searched stay
    /// plan they were built from.
    fn candidates(
        &mut self,
        system: &System,
        f: &mut Follow,
        input: &PlanInput,
        window: &[Vec<u32>],
        ahead: &[Vec<u32>],
        period_ms: f64,
    ) -> (Option<Plan>, Option<Plan>, Vec<Candidate>) {
        // The policy plans for the scenes the replays are run on.
        let full: Vec<Vec<u32>> = window
            .iter()
            .chain(ahead)
            .map(|f| {
                let mut scene = input.scene.to_vec();
                for (i, &c) in system.request_models().zip(f) {
                    scene[i.0] = c;
                }
                scene
            })
            .collect();
        let epoch = EpochScenes::from_frames(
            input.scene,
            full.iter().map(|s| s.as_slice()),
            self.tuning.epoch_scenes,
            period_ms,
        );
        // No plan of the policy's fits when the scene needs more models than
        // the slots hold; the other choices are still offered.
        let planned = self.global.plan_epoch(system, input, &epoch);
        let new = repair(system, input, &planned).ok();
        let search = f.resplit.get_or_insert_with(|| Search::new(system));
        let stay = stay_split(system, input, search);
        let fixed = f
            .fixed
            .get_or_insert_with(|| Fixed::static_dist(system, f.local.wait_ms()));
        let mut pinned = Plan::empty(system);
        for i in system.model_ids() {
            pinned.set_resident(i, fixed.host(i), true);
        }
        // Algorithm 1's start-up residency (the detector on its fastest
        // unit): a way back once a choice has moved the detector.
        let home = keep_idle_residents(
            system,
            input,
            &crate::plan::fill_free_slots(system, &crate::plan::fastest_hosts(system)),
        );
        // The stream residency is for the mean scene the replays are run
        // on (the past window and the latest scene held): the latest scene
        // alone moves with every step on a random walk, and each move loads.
        let replayed = mean_scene(system, input.scene, window.iter().chain(ahead));
        let stream_input = PlanInput {
            scene: &replayed,
            ..*input
        };
        let stream = stream_residency_with(system, &stream_input, self.tuning.replica_factor);
        let back = detector_home(system, input).map(|b| keep_idle_residents(system, input, &b));
        let kept = new.as_ref().map(|n| keep_idle_residents(system, input, n));
        let statics = keep_idle_residents(system, input, &pinned);
        let local = Mode::Local;
        let (paper, eft, split) = (
            local(HostRule::PerRequest),
            local(HostRule::FinishTime),
            local(HostRule::GroupFinish),
        );
        let mut out = vec![
            cand(Choice::Plan, kept, Mode::Plan, new.clone()),
            cand(Choice::StayPlan, None, Mode::Plan, stay.clone()),
            cand(Choice::Paper, None, paper, stay.clone()),
            cand(Choice::FinishTime, None, eft, stay.clone()),
            cand(
                Choice::StaticDist,
                Some(statics),
                Mode::Static,
                stay.clone(),
            ),
            cand(Choice::PaperHome, Some(home.clone()), paper, stay.clone()),
            cand(
                Choice::FinishTimeHome,
                Some(home.clone()),
                eft,
                stay.clone(),
            ),
            cand(Choice::Split, None, split, stay.clone()),
            cand(Choice::SplitHome, Some(home), split, stay.clone()),
            cand(Choice::Queue, None, Mode::Queue, stay.clone()),
            cand(
                Choice::StreamFinishTime,
                Some(stream.clone()),
                eft,
                stay.clone(),
            ),
            cand(Choice::StreamSplit, Some(stream), split, stay.clone()),
        ];
        if let Some(back) = back {
            out.push(cand(Choice::DetectorHome, Some(back), paper, stay.clone()));
        }
        // Following a plan needs one.
        out.retain(|c| c.mode != Mode::Plan || c.plan.is_some());
        out.retain(|c| self.tuning.offers(c.choice));
        (new, stay, out)
    }

    /// Replays every candidate and returns the one to keep: the incumbent
    /// unless another is clearly better ([`Score::beats`]); a kind whose
    /// record trails the default's only on a gain of
    /// [`Tuning::record_override`]. Leaves the audit of this step.
    fn choose(&mut self, r: &Replays, candidates: &mut [Candidate], incumbent: Choice) -> Choice {
        let mut best: Option<(Choice, Score)> = None;
        let scored = r.window.len() + r.ahead.len();
        // The incumbent first, so a tie keeps it.
        candidates.sort_by_key(|c| c.choice != incumbent);
        let mut probes = Vec::with_capacity(candidates.len());
        let mut scores: [Option<Score>; Choice::COUNT] = [None; Choice::COUNT];
        let mut trailing: Vec<(Choice, Score)> = Vec::new();
        for c in candidates.iter() {
            let (probe, cluster, same_as) = r.start(c, candidates);
            let score = if self.record.misjudged(c.choice) {
                None
            } else {
                same_as
                    .and_then(|t| scores[t.index()])
                    .or_else(|| r.score(&probe, &cluster))
            };
            scores[c.choice.index()] = score;
            probes.push(Probe {
                choice: c.choice,
                follow: probe,
                cluster,
                same_as,
            });
            let Some(score) = score else {
                continue;
            };
            if self.record.trails(c.choice) {
                trailing.push((c.choice, score));
                continue;
            }
            let proven = self.record.proves(c.choice);
            if best
                .as_ref()
                .is_none_or(|b| score.beats(&b.1, scored, proven, &self.tuning))
            {
                best = Some((c.choice, score));
            }
        }
        let overriding = ((scored as f64 * self.tuning.record_override).ceil() as usize).max(1);
        for (choice, score) in trailing {
            if best
                .as_ref()
                .is_some_and(|b| score.on_time >= b.1.on_time.saturating_add(overriding))
            {
                best = Some((choice, score));
            }
        }
        self.audit = Some(Audit {
            at_ms: r.now,
            probes,
        });
        best.map_or(incumbent, |b| b.0)
    }
}

fn cand(choice: Choice, load: Option<Plan>, mode: Mode, plan: Option<Plan>) -> Candidate {
    Candidate {
        choice,
        load,
        mode,
        plan,
    }
}

/// What a step replays its candidates on: the board, the cluster and the
/// dispatcher at `now`, the past window and the latest scene held.
struct Replays<'a> {
    system: &'a System,
    cluster: &'a Cluster,
    follow: &'a Follow,
    input: &'a PlanInput<'a>,
    now: f64,
    window: &'a [Vec<u32>],
    ahead: &'a [Vec<u32>],
    cfg: crate::sim::SimConfig,
}

impl Replays<'_> {
    /// The dispatcher and the cluster as candidate `c` starts (its loads
    /// under way), and the earlier candidate it is the same as: a return to
    /// the residency the cluster already has loads and evicts nothing, so
    /// it replays as the candidate with the same rule and plan that loads
    /// nothing.
    fn start(&self, c: &Candidate, all: &[Candidate]) -> (Follow, Cluster, Option<Choice>) {
        let mut probe = self.follow.clone();
        let mut cluster = self.cluster.clone();
        if let Some(residency) = &c.load {
            let loads = cluster.apply_residency(self.system, self.now, residency);
            probe.loads_started(&cluster, self.now, loads);
        }
        let same_as = (c.load.is_some() && cluster.residency() == self.cluster.residency())
            .then(|| {
                all.iter()
                    .find(|o| o.load.is_none() && o.mode == c.mode && o.plan == c.plan)
                    .map(|o| o.choice)
            })
            .flatten();
        probe.mode = c.mode;
        if let Some(plan) = c.plan.clone() {
            probe.set_plan(self.system, &cluster, self.input, plan);
        }
        (probe, cluster, same_as)
    }

    /// The candidate's score on the window and the latest scene held.
    fn score(&self, probe: &Follow, cluster: &Cluster) -> Option<Score> {
        score_choice(
            self.system,
            probe,
            cluster,
            self.now,
            self.window,
            self.ahead,
            &self.cfg,
        )
    }
}
