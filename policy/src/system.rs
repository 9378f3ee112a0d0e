//! The validated, indexed problem: processors, the model graph, priorities and
//! the profile as flat tables that the hot paths read without hashing.

use std::collections::BTreeMap;

use crate::spec::{ProcessorKind, SystemSpec};
use crate::SpecError;

/// Index of a processor p_j in [`System::processors`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcId(pub usize);

/// Index of a model M_i in [`System::models`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModelId(pub usize);

/// A processing unit after validation.
#[derive(Clone, Debug, PartialEq)]
pub struct Processor {
    /// Name from the spec.
    pub name: String,
    /// Kind of unit.
    pub kind: ProcessorKind,
    /// N_j.
    pub max_resident: usize,
    /// Memory budget for resident models, MB.
    pub memory_budget_mb: Option<f64>,
    /// Most share of time the unit may be busy, in (0, 1] (1: no cap).
    pub utilisation_cap: f64,
}

/// A model after validation.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// Name from the spec.
    pub name: String,
    /// The model feeding this one; `None` for a detector.
    pub parent: Option<ModelId>,
    /// Models fed by this one.
    pub children: Vec<ModelId>,
    /// Distance from the root (detectors are level 0).
    pub level: usize,
    /// Detector classes routed here.
    pub classes: Vec<String>,
}

/// The validated problem every scheduler, the simulator and the ILP share.
#[derive(Clone, Debug, PartialEq)]
pub struct System {
    /// Name for reports.
    pub name: String,
    /// p_j, in spec order.
    pub processors: Vec<Processor>,
    /// M_i, in spec order.
    pub models: Vec<Model>,
    /// n_b.
    pub max_batch: usize,
    exec: Vec<f64>,
    load: Vec<f64>,
    /// Bumped by every [`System::set_pair_timings`], so caches built from
    /// the timings know when to rebuild.
    generation: u64,
    size_mb: Vec<f64>,
    preferred: Vec<u8>,
    priority: Vec<f64>,
    routes: BTreeMap<String, ModelId>,
}

impl System {
    /// Parses and validates a system file.
    pub fn from_toml(text: &str) -> Result<Self, SpecError> {
        Self::from_spec(&SystemSpec::from_toml(text)?)
    }

    /// Validates a spec: unique names, known references, an acyclic graph
    /// rooted at detectors, positive finite timings, batch lists within n_b.
    pub fn from_spec(spec: &SystemSpec) -> Result<Self, SpecError> {
        let nb = spec.max_batch;
        if nb == 0 || nb > u8::MAX as usize {
            return Err(bad("max_batch", nb, "must be between 1 and 255"));
        }
        let (processors, proc_index) = checked_processors(spec)?;
        let (models, model_index, routes) = checked_models(spec)?;
        let tables = Tables::of(spec, &processors, &model_index, &proc_index)?;
        for (i, m) in models.iter().enumerate() {
            if (0..processors.len()).all(|j| tables.load[i * processors.len() + j].is_infinite()) {
                return Err(SpecError::Unsupported(m.name.clone()));
            }
        }
        let mut system = System {
            name: spec.name.clone(),
            processors,
            models,
            max_batch: nb,
            exec: tables.exec,
            load: tables.load,
            generation: 0,
            size_mb: tables.size_mb,
            preferred: Vec::new(),
            priority: Vec::new(),
            routes,
        };
        system.preferred = system.preferred_batch_table();
        system.priority = crate::rank::priorities(&system);
        Ok(system)
    }

    /// n_m.
    pub fn num_models(&self) -> usize {
        self.models.len()
    }

    /// n_p.
    pub fn num_processors(&self) -> usize {
        self.processors.len()
    }

    /// All processor ids.
    pub fn proc_ids(&self) -> impl Iterator<Item = ProcId> + Clone {
        (0..self.processors.len()).map(ProcId)
    }

    /// All model ids.
    pub fn model_ids(&self) -> impl Iterator<Item = ModelId> + Clone {
        (0..self.models.len()).map(ModelId)
    }

    /// The models that take per-object requests (everything but the roots).
    pub fn request_models(&self) -> impl Iterator<Item = ModelId> + '_ {
        self.model_ids()
            .filter(|m| self.models[m.0].parent.is_some())
    }

    /// The detectors (graph roots).
    pub fn roots(&self) -> impl Iterator<Item = ModelId> + '_ {
        self.model_ids()
            .filter(|m| self.models[m.0].parent.is_none())
    }

    /// Looks a processor up by name.
    pub fn proc_by_name(&self, name: &str) -> Option<ProcId> {
        self.processors
            .iter()
            .position(|p| p.name == name)
            .map(ProcId)
    }

    /// Looks a model up by name.
    pub fn model_by_name(&self, name: &str) -> Option<ModelId> {
        self.models.iter().position(|m| m.name == name).map(ModelId)
    }

    /// The model that handles a detector class, if any.
    pub fn route(&self, class: &str) -> Option<ModelId> {
        self.routes.get(class).copied()
    }

    /// t_e(i,j,k) in ms; `f64::INFINITY` when the pair or batch size is unsupported.
    #[inline]
    pub fn exec_ms(&self, i: ModelId, j: ProcId, k: usize) -> f64 {
        if k == 0 || k > self.max_batch {
            return f64::INFINITY;
        }
        self.exec[(i.0 * self.processors.len() + j.0) * self.max_batch + k - 1]
    }

    /// t_l(i,j) in ms; `f64::INFINITY` when unsupported.
    #[inline]
    pub fn load_ms(&self, i: ModelId, j: ProcId) -> f64 {
        self.load[i.0 * self.processors.len() + j.0]
    }

    /// Replaces t_e(i,j,k) for k = 1..=exec_ms.len() and t_l(i,j) of a
    /// supported pair with live estimates, and re-derives what depends on
    /// them (preferred batch sizes, priorities). Non-finite or non-positive
    /// entries, unsupported pairs and sizes the profile lacks are left as
    /// they were.
    pub fn set_pair_timings(&mut self, i: ModelId, j: ProcId, exec_ms: &[f64], load_ms: f64) {
        if !self.supports(i, j) {
            return;
        }
        let nb = self.max_batch;
        let base = (i.0 * self.processors.len() + j.0) * nb;
        for (k, &t) in exec_ms.iter().enumerate().take(nb) {
            let cell = &mut self.exec[base + k];
            if cell.is_finite() && t.is_finite() && t > 0.0 {
                *cell = t;
            }
        }
        if load_ms.is_finite() && load_ms >= 0.0 {
            self.load[i.0 * self.processors.len() + j.0] = load_ms;
        }
        self.preferred = self.preferred_batch_table();
        self.priority = crate::rank::priorities(self);
        self.generation += 1;
    }

    /// How many times the timings were replaced since the profile was read
    /// ([`System::set_pair_timings`]).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The profile as a spec again, with the current timings (live
    /// estimates included): what `camdnnd profile` writes.
    pub fn to_spec(&self) -> SystemSpec {
        use crate::spec::{ModelSpec, PairSpec, ProcessorSpec};
        let mut profile = crate::spec::ProfileSpec::new();
        for i in self.model_ids() {
            for j in self.proc_ids().filter(|&j| self.supports(i, j)) {
                let exec_ms = (1..=self.max_batch_on(i, j))
                    .map(|k| self.exec_ms(i, j, k))
                    .collect();
                let size = self.size_mb(i, j);
                profile
                    .entry(self.models[i.0].name.clone())
                    .or_default()
                    .insert(
                        self.processors[j.0].name.clone(),
                        PairSpec {
                            exec_ms,
                            load_ms: self.load_ms(i, j),
                            size_mb: (size > 0.0).then_some(size),
                        },
                    );
            }
        }
        SystemSpec {
            name: self.name.clone(),
            max_batch: self.max_batch,
            processors: self
                .processors
                .iter()
                .map(|p| ProcessorSpec {
                    name: p.name.clone(),
                    kind: p.kind,
                    max_resident: p.max_resident,
                    memory_budget_mb: p.memory_budget_mb,
                    utilisation_cap: (p.utilisation_cap < 1.0).then_some(p.utilisation_cap),
                })
                .collect(),
            models: self
                .models
                .iter()
                .map(|m| ModelSpec {
                    name: m.name.clone(),
                    parent: m.parent.map(|p| self.models[p.0].name.clone()),
                    classes: m.classes.clone(),
                })
                .collect(),
            profile,
        }
    }

    /// Resident size of model i on p_j in MB (0 when not given).
    #[inline]
    pub fn size_mb(&self, i: ModelId, j: ProcId) -> f64 {
        self.size_mb[i.0 * self.processors.len() + j.0]
    }

    /// Whether p_j can run model i at all.
    #[inline]
    pub fn supports(&self, i: ModelId, j: ProcId) -> bool {
        self.load_ms(i, j).is_finite()
    }

    /// Largest batch size profiled for (i, j); 0 when unsupported.
    pub fn max_batch_on(&self, i: ModelId, j: ProcId) -> usize {
        (1..=self.max_batch)
            .rev()
            .find(|&k| self.exec_ms(i, j, k).is_finite())
            .unwrap_or(0)
    }

    /// Batch sizes for (i, j) ordered by time per request t_e/k, best first
    /// (Algorithm 1's preferred list). Empty when unsupported.
    #[inline]
    pub fn preferred_batches(&self, i: ModelId, j: ProcId) -> &[u8] {
        let nb = self.max_batch;
        let base = (i.0 * self.processors.len() + j.0) * nb;
        let row = &self.preferred[base..base + nb];
        let len = row.iter().position(|&k| k == 0).unwrap_or(nb);
        &row[..len]
    }

    /// rho_i = upward rank + downward rank (paper Sec. 5.1.1).
    #[inline]
    pub fn priority(&self, i: ModelId) -> f64 {
        self.priority[i.0]
    }

    /// Mean t_e(i,j,1) over the processors that support i: the node weight
    /// used for ranks and by content-unaware baselines.
    pub fn mean_exec1_ms(&self, i: ModelId) -> f64 {
        let (sum, n) = self
            .proc_ids()
            .filter(|&j| self.supports(i, j))
            .fold((0.0, 0usize), |(s, n), j| {
                (s + self.exec_ms(i, j, 1), n + 1)
            });
        sum / n as f64
    }

    /// The processors a model can run on.
    pub fn supporting(&self, i: ModelId) -> impl Iterator<Item = ProcId> + '_ {
        self.proc_ids().filter(move |&j| self.supports(i, j))
    }

    /// A copy of this system with p_j's residency limit changed.
    pub fn with_max_resident(mut self, j: ProcId, n: usize) -> Self {
        self.processors[j.0].max_resident = n.max(1);
        self
    }

    fn preferred_batch_table(&self) -> Vec<u8> {
        let nb = self.max_batch;
        let mut table = vec![0u8; self.models.len() * self.processors.len() * nb];
        for i in self.model_ids() {
            for j in self.proc_ids() {
                let mut ks: Vec<usize> = (1..=nb)
                    .filter(|&k| self.exec_ms(i, j, k).is_finite())
                    .collect();
                ks.sort_by(|&a, &b| {
                    let (pa, pb) = (
                        self.exec_ms(i, j, a) / a as f64,
                        self.exec_ms(i, j, b) / b as f64,
                    );
                    pa.total_cmp(&pb).then(b.cmp(&a))
                });
                let base = (i.0 * self.processors.len() + j.0) * nb;
                for (n, k) in ks.into_iter().enumerate() {
                    table[base + n] = k as u8;
                }
            }
        }
        table
    }
}

/// Processors by name.
type ProcIndex = BTreeMap<String, ProcId>;
/// Models by name.
type ModelIndex = BTreeMap<String, ModelId>;
/// The model each class routes to.
type Routes = BTreeMap<String, ModelId>;

/// The spec's processors, checked (non-empty unique names, at least one model slot, a
/// positive memory budget, a utilisation cap in (0, 1]), and their index by name.
fn checked_processors(spec: &SystemSpec) -> Result<(Vec<Processor>, ProcIndex), SpecError> {
    let mut proc_index = BTreeMap::new();
    let mut processors = Vec::with_capacity(spec.processors.len());
    if spec.processors.is_empty() {
        return Err(bad("processor", "[]", "at least one processor is needed"));
    }
    for (j, p) in spec.processors.iter().enumerate() {
        if p.name.is_empty() {
            return Err(bad(
                format!("processor[{j}].name"),
                "\"\"",
                "must not be empty",
            ));
        }
        if proc_index.insert(p.name.clone(), ProcId(j)).is_some() {
            return Err(SpecError::Duplicate {
                what: "processor",
                name: p.name.clone(),
            });
        }
        if p.max_resident == 0 {
            return Err(bad(
                format!("processor.{}.max_resident", p.name),
                0,
                "must be at least 1",
            ));
        }
        if let Some(b) = p.memory_budget_mb {
            check_positive(format!("processor.{}.memory_budget_mb", p.name), b)?;
        }
        let cap = p.utilisation_cap.unwrap_or(1.0);
        if !(cap > 0.0 && cap <= 1.0) {
            return Err(bad(
                format!("processor.{}.utilisation_cap", p.name),
                cap,
                "must be in (0, 1]",
            ));
        }
        processors.push(Processor {
            name: p.name.clone(),
            kind: p.kind,
            max_resident: p.max_resident,
            memory_budget_mb: p.memory_budget_mb,
            utilisation_cap: cap,
        });
    }
    Ok((processors, proc_index))
}

/// The spec's models, checked (unique names, known parents, an acyclic graph rooted at
/// detectors, each class routed to one model), with their levels and children, their index
/// by name, and the class routes.
fn checked_models(spec: &SystemSpec) -> Result<(Vec<Model>, ModelIndex, Routes), SpecError> {
    let mut model_index = BTreeMap::new();
    for (i, m) in spec.models.iter().enumerate() {
        if m.name.is_empty() {
            return Err(bad(format!("model[{i}].name"), "\"\"", "must not be empty"));
        }
        if model_index.insert(m.name.clone(), ModelId(i)).is_some() {
            return Err(SpecError::Duplicate {
                what: "model",
                name: m.name.clone(),
            });
        }
    }
    let mut models: Vec<Model> = Vec::with_capacity(spec.models.len());
    for m in &spec.models {
        let parent = match &m.parent {
            None => None,
            Some(p) => Some(*model_index.get(p).ok_or_else(|| SpecError::Unknown {
                field: format!("model.{}.parent", m.name),
                what: "model",
                name: p.clone(),
            })?),
        };
        models.push(Model {
            name: m.name.clone(),
            parent,
            children: Vec::new(),
            level: 0,
            classes: m.classes.clone(),
        });
    }
    if !models.iter().any(|m| m.parent.is_none()) {
        return Err(SpecError::NoRoot);
    }
    for i in 0..models.len() {
        let mut level = 0;
        let mut cur = models[i].parent;
        while let Some(p) = cur {
            level += 1;
            if level > models.len() {
                return Err(SpecError::Cycle(models[i].name.clone()));
            }
            cur = models[p.0].parent;
        }
        models[i].level = level;
        if let Some(p) = models[i].parent {
            models[p.0].children.push(ModelId(i));
        }
    }
    let mut routes = Routes::new();
    for (i, m) in models.iter().enumerate() {
        for class in &m.classes {
            if let Some(first) = routes.insert(class.clone(), ModelId(i)) {
                return Err(SpecError::ClassRoutedTwice {
                    class: class.clone(),
                    first: models[first.0].name.clone(),
                    second: m.name.clone(),
                });
            }
        }
    }
    Ok((models, model_index, routes))
}

/// The profile's flat tables: t_e(i, j, k), t_l(i, j) and sizes, infinite where a pair is
/// unsupported.
struct Tables {
    exec: Vec<f64>,
    load: Vec<f64>,
    size_mb: Vec<f64>,
}

impl Tables {
    /// Reads and checks the spec's profile against its models and processors.
    fn of(
        spec: &SystemSpec,
        processors: &[Processor],
        model_index: &ModelIndex,
        proc_index: &ProcIndex,
    ) -> Result<Tables, SpecError> {
        let nb = spec.max_batch;
        let (nm, np) = (model_index.len(), processors.len());
        let mut exec = vec![f64::INFINITY; nm * np * nb];
        let mut load = vec![f64::INFINITY; nm * np];
        let mut size_mb = vec![0.0; nm * np];
        for (mname, per_proc) in &spec.profile {
            let i = *model_index.get(mname).ok_or_else(|| SpecError::Unknown {
                field: format!("profile.{mname}"),
                what: "model",
                name: mname.clone(),
            })?;
            for (pname, pair) in per_proc {
                let field = format!("profile.{mname}.{pname}");
                let j = *proc_index.get(pname).ok_or_else(|| SpecError::Unknown {
                    field: field.clone(),
                    what: "processor",
                    name: pname.clone(),
                })?;
                if pair.exec_ms.is_empty() || pair.exec_ms.len() > nb {
                    return Err(bad(
                        format!("{field}.exec_ms"),
                        format!("{} entries", pair.exec_ms.len()),
                        "needs between 1 and max_batch entries (k = 1, 2, ...)",
                    ));
                }
                for (k, &t) in pair.exec_ms.iter().enumerate() {
                    check_positive(format!("{field}.exec_ms[{k}]"), t)?;
                    exec[(i.0 * np + j.0) * nb + k] = t;
                }
                if !(pair.load_ms.is_finite() && pair.load_ms >= 0.0) {
                    return Err(bad(
                        format!("{field}.load_ms"),
                        pair.load_ms,
                        "must be a finite number of milliseconds >= 0",
                    ));
                }
                load[i.0 * np + j.0] = pair.load_ms;
                match (pair.size_mb, processors[j.0].memory_budget_mb) {
                    (Some(s), _) => {
                        check_positive(format!("{field}.size_mb"), s)?;
                        size_mb[i.0 * np + j.0] = s;
                    }
                    (None, Some(_)) => {
                        return Err(bad(
                            format!("{field}.size_mb"),
                            "missing",
                            "is required because the processor has a memory_budget_mb",
                        ))
                    }
                    (None, None) => {}
                }
            }
        }
        Ok(Tables {
            exec,
            load,
            size_mb,
        })
    }
}

fn bad(field: impl Into<String>, value: impl ToString, reason: &'static str) -> SpecError {
    SpecError::BadValue {
        field: field.into(),
        value: value.to_string(),
        reason,
    }
}

fn check_positive(field: String, v: f64) -> Result<(), SpecError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(bad(field, v, "must be a positive finite number"))
    }
}
