//! The global step itself: build this step's candidates, replay each and
//! keep the best.

use super::choice::Choice;
use super::follow::{Follow, Mode};
use super::replay::{lookahead, mean_scene, replay_config, score_choice, Score};
use super::residency::{beats, keep_idle_residents, stay_split, stream_residency};
use super::tuning::Tuning;
use crate::admission::FrameAdmission;
use crate::epoch::EpochScenes;
use crate::mlp::search::Search;
use crate::{repair, Cluster, Detector, GlobalPolicy, HostRule, Plan, PlanInput, System};

/// The global step's own state, moved into the job that computes a step
/// and back when it is applied, so the step can run on another thread
/// while the dispatcher goes on.
pub(super) struct Planner<G> {
    pub(super) global: G,
    pub(super) tuning: Tuning,
    /// The last epoch's window that saw any frame, padded to the epoch's
    /// offered frames: what a choice is replayed on.
    pub(super) last_window: Vec<Vec<u32>>,
    /// When the last global step ran, ms (0 before the first).
    last_epoch_ms: f64,
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
    /// A planner with no window yet that plans with `global`.
    pub(super) fn new(global: G, tuning: Tuning) -> Self {
        Planner {
            global,
            tuning,
            last_window: Vec::new(),
            last_epoch_ms: 0.0,
        }
    }

    /// Decides a global step on what it was given: every candidate
    /// replayed and the best kept.
    pub(super) fn decide(&mut self, input: &mut StepInput) -> Option<StepChoice> {
        let window = std::mem::take(&mut input.window);
        self.remember(window, input.frames_per_epoch);
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
        let window = self.last_window.clone();
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
                    incumbent?
                }
                (Some(_), _) => Choice::Plan,
                (None, _) => incumbent?,
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
            self.choose(&replays, &mut candidates, incumbent)?
        };
        let c = candidates.into_iter().find(|c| c.choice == choice)?;
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
    /// offered, the first [`Tuning::replay_frames`] of them) for the
    /// replays when any frame was observed.
    fn remember(&mut self, mut window: Vec<Vec<u32>>, frames_per_epoch: f64) {
        // Frames dropped before their detector ran were never observed:
        // each observed scene stands for its share of the epoch's frames.
        let offered = frames_per_epoch.round() as usize;
        if !window.is_empty() && window.len() < offered {
            window = (0..offered)
                .map(|k| window[k * window.len() / offered].clone())
                .collect();
        }
        window.truncate(self.tuning.replay_frames);
        if !window.is_empty() {
            self.last_window = window;
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
        // The policy plans for the latest scene: planning also for the
        // replayed frames' most frequent scenes carried no weight.
        let epoch = EpochScenes::latest(input.scene, period_ms);
        // No plan of the policy's fits when the scene needs more models than
        // the slots hold; the other choices are still offered.
        let planned = self.global.plan_epoch(system, input, &epoch);
        let new = repair(system, input, &planned).ok();
        let search = f.resplit.get_or_insert_with(|| Search::new(system));
        let stay = stay_split(system, input, search);
        // The stream residency is for the mean scene the replays are run
        // on (the past window and the latest scene held): the latest scene
        // alone moves with every step on a random walk, and each move loads.
        let replayed = mean_scene(system, input.scene, window.iter().chain(ahead));
        let stream_input = PlanInput {
            scene: &replayed,
            ..*input
        };
        let stream = stream_residency(system, &stream_input);
        let kept = new.as_ref().map(|n| keep_idle_residents(system, input, n));
        let local = Mode::Local;
        let (paper, eft, split) = (
            local(HostRule::PerRequest),
            local(HostRule::FinishTime),
            local(HostRule::GroupFinish),
        );
        let mut out = vec![
            cand(Choice::Plan, kept, Mode::Plan, new.clone()),
            cand(Choice::Paper, None, paper, stay.clone()),
            cand(Choice::FinishTime, None, eft, stay.clone()),
            cand(Choice::StreamSplit, Some(stream), split, stay.clone()),
        ];
        // Following a plan needs one.
        out.retain(|c| c.mode != Mode::Plan || c.plan.is_some());
        out.retain(|c| self.tuning.offers(c.choice));
        (new, stay, out)
    }

    /// Replays every candidate and returns the one to keep: the incumbent
    /// (if any) unless another is better ([`Score::beats`]), else the best
    /// (the first of equals); none when no candidate could be replayed and
    /// there is no incumbent.
    fn choose(
        &self,
        r: &Replays,
        candidates: &mut [Candidate],
        incumbent: Option<Choice>,
    ) -> Option<Choice> {
        let mut best: Option<(Choice, Score)> = None;
        // The incumbent first, so a tie keeps it.
        candidates.sort_by_key(|c| Some(c.choice) != incumbent);
        for c in candidates.iter() {
            let (probe, cluster) = r.start(c);
            let Some(score) = r.score(&probe, &cluster) else {
                continue;
            };
            if best.as_ref().is_none_or(|b| score.beats(&b.1)) {
                best = Some((c.choice, score));
            }
        }
        best.map(|b| b.0).or(incumbent)
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
    /// under way).
    fn start(&self, c: &Candidate) -> (Follow, Cluster) {
        let mut probe = self.follow.clone();
        let mut cluster = self.cluster.clone();
        if let Some(residency) = &c.load {
            cluster.apply_residency(self.system, self.now, residency);
        }
        probe.mode = c.mode;
        if let Some(plan) = c.plan.clone() {
            probe.set_plan(self.system, &cluster, self.input, plan);
        }
        (probe, cluster)
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
