//! Model priorities: upward rank plus downward rank over the application
//! graph (paper Sec. 5.1.1, after HEFT), node weight = mean t_e at batch 1.

use crate::{ModelId, System};

/// rho_i for every model, indexed by `ModelId`.
pub fn priorities(system: &System) -> Vec<f64> {
    let n = system.num_models();
    let weight: Vec<f64> = system
        .model_ids()
        .map(|i| system.mean_exec1_ms(i))
        .collect();
    // Models sorted by level so parents come before children.
    let mut order: Vec<ModelId> = system.model_ids().collect();
    order.sort_by_key(|m| system.models[m.0].level);

    let mut down = vec![0.0; n];
    for &m in &order {
        if let Some(p) = system.models[m.0].parent {
            down[m.0] = down[p.0] + weight[p.0];
        }
    }
    let mut up = vec![0.0; n];
    for &m in order.iter().rev() {
        let below = system.models[m.0]
            .children
            .iter()
            .map(|c| up[c.0])
            .fold(0.0, f64::max);
        up[m.0] = weight[m.0] + below;
    }
    (0..n).map(|i| up[i] + down[i]).collect()
}
