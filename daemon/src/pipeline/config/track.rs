//! `[pipeline.track]` (`camdnn_vision::track::TrackerConfig`: following a stream's objects
//! across frames, the detector interval) and each model's `reuse`
//! (`camdnn_policy::reuse::ReuseConfig`): checked together, with a message naming the field.
//! `camdnnd track-eval` applies them to a clip (`docs/operations.md`, "Tracking and result
//! reuse").

use anyhow::bail;

use super::PipelineConfig;

/// Checks `[pipeline.track]` and every model's `reuse`: bad values, reuse on a detector,
/// reuse without tracking.
pub fn check(p: &PipelineConfig) -> anyhow::Result<()> {
    if let Some(t) = &p.track {
        t.check("pipeline.track")?;
    }
    for m in &p.models {
        let Some(r) = &m.reuse else { continue };
        let field = format!("pipeline.model {:?}: reuse", m.name);
        r.check("reuse")
            .map_err(|e| anyhow::anyhow!("pipeline.model {:?}: {e}", m.name))?;
        if m.parent.is_none() {
            bail!("{field} is set on a detector, which runs per frame, not per object (see pipeline.track.detector_interval)");
        }
        if p.track.is_none() {
            bail!("{field} needs [pipeline.track]: a result is reused for the track it was computed on");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A street-like graph: an upstream detector, pose per person, faces per pose.
    fn config(track: &str, pose_reuse: &str) -> String {
        format!(
            r#"
profile = "p.toml"
{track}
[[processor]]
name = "cpu"
kind = "cpu"
max_resident = 2
engine = "tract"
[[model]]
name = "det"
output = {{ kind = "upstream" }}
[[model]]
name = "pose"
path = "p.onnx"
parent = "det"
classes = ["person"]
input = {{ width = 8, height = 8, norm = {{}} }}
output = {{ kind = "topk" }}
{pose_reuse}
"#
        )
    }

    fn parse(track: &str, reuse: &str) -> anyhow::Result<PipelineConfig> {
        let cfg: PipelineConfig = toml::from_str(&config(track, reuse))?;
        cfg.check()?;
        Ok(cfg)
    }

    fn err(track: &str, reuse: &str) -> String {
        format!("{:#}", parse(track, reuse).unwrap_err())
    }

    #[test]
    fn absent_sections_leave_tracking_and_reuse_off() {
        let cfg = parse("", "").unwrap();
        assert!(cfg.track.is_none() && cfg.models.iter().all(|m| m.reuse.is_none()));
    }

    #[test]
    fn the_knobs_read_with_their_defaults() {
        let cfg = parse(
            "[track]\ndetector_interval = 3",
            "reuse = { reinfer_interval = 5, min_score = 0.6 }",
        )
        .unwrap();
        let t = cfg.track.unwrap();
        assert_eq!(
            t,
            camdnn_vision::track::TrackerConfig {
                detector_interval: 3,
                ..Default::default()
            }
        );
        let r = cfg.models[1].reuse.clone().unwrap();
        assert_eq!((r.reinfer_interval, r.min_score), (5, Some(0.6)));
        assert_eq!(r.max_area_ratio, 1.2);
    }

    #[test]
    fn bad_values_are_refused_naming_the_field() {
        for (track, field) in [
            ("[track]\nmin_iou = 1.5", "pipeline.track.min_iou"),
            ("[track]\nbirth_hits = 0", "pipeline.track.birth_hits"),
            ("[track]\nmax_tracks = 0", "pipeline.track.max_tracks"),
            ("[track]\nmax_streams = 0", "pipeline.track.max_streams"),
            (
                "[track]\ndetector_interval = 0",
                "pipeline.track.detector_interval",
            ),
            (
                "[track]\ndetector_interval = 20\nmax_misses = 10",
                "`pipeline.track.detector_interval`: must be 1 (every frame) to max_misses (10)",
            ),
        ] {
            let e = err(track, "");
            assert!(e.contains(field), "{track}: {e}");
        }
        for (reuse, field) in [
            ("reuse = { reinfer_interval = 0 }", "reuse.reinfer_interval"),
            ("reuse = { min_iou = -1.0 }", "reuse.min_iou"),
            ("reuse = { max_area_ratio = 0.5 }", "reuse.max_area_ratio"),
            ("reuse = { min_score = 2.0 }", "reuse.min_score"),
            ("reuse = { max_age_ms = -5.0 }", "reuse.max_age_ms"),
        ] {
            let e = err("[track]", reuse);
            assert!(
                e.contains("pipeline.model \"pose\"") && e.contains(field),
                "{reuse}: {e}"
            );
        }
    }

    #[test]
    fn reuse_needs_tracking_and_a_per_object_model() {
        let e = err("", "reuse = {}");
        assert!(e.contains("needs [pipeline.track]"), "{e}");
        let cfg = config("[track]", "").replace(
            "output = { kind = \"upstream\" }",
            "output = { kind = \"upstream\" }\nreuse = {}",
        );
        let cfg: PipelineConfig = toml::from_str(&cfg).unwrap();
        let e = format!("{:#}", cfg.check().unwrap_err());
        assert!(e.contains("\"det\": reuse is set on a detector"), "{e}");
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(parse("[track]\ndetector_intervals = 2", "").is_err());
        assert!(parse("[track]", "reuse = { reinfer = 2 }").is_err());
    }
}
