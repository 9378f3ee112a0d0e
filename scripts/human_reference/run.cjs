// The Human library's own pipeline (BlazeFace -> face mesh -> faceres, MoveNet) on raw RGB
// files, with the pure-JS TF.js CPU backend: node run.cjs W H file.rgb [W H file.rgb ...]
// (scripts/human_reference/run.sh prepares everything). With DUMP=1 each face crop faceres
// saw is written as FILE.faceN.f32 (192x192x3 float32, 0..1).
const fs = require('fs');
const path = require('path');
const models = path.resolve(__dirname, 'package/models');
globalThis.fetch = async (url) => {
  const p = path.join(models, String(url).replace(/^.*\/models\//, ''));
  return new Response(fs.readFileSync(p), { status: 200 });
};
const tf = require('@tensorflow/tfjs-core');
require('@tensorflow/tfjs-backend-cpu');
const H = require('./package/dist/human.node-wasm.js');
(async () => {
  const human = new H.Human({
    backend: 'cpu', modelBasePath: 'http://local/models/', debug: false, cacheModels: false,
    face: { enabled: true, detector: { rotation: false, return: true }, mesh: { enabled: true }, iris: { enabled: false },
      emotion: { enabled: false }, description: { enabled: true }, antispoof: { enabled: false }, liveness: { enabled: false } },
    body: { enabled: true }, hand: { enabled: false }, object: { enabled: false }, gesture: { enabled: false }, segmentation: { enabled: false },
    filter: { enabled: false },
  });
  await human.tf.setBackend('cpu');
  await human.load();
  const args = process.argv.slice(2);
  for (let i = 0; i < args.length; i += 3) {
    const [w, h, f] = [Number(args[i]), Number(args[i + 1]), args[i + 2]];
    const buf = fs.readFileSync(f);
    const t = human.tf.tensor(new Uint8Array(buf), [1, h, w, 3], 'int32');
    const tf32 = human.tf.cast(t, 'float32');
    const r = await human.detect(tf32);
    const out = { file: path.basename(f), faces: r.face.map((x) => ({ box: x.box, score: x.score, age: x.age, gender: x.gender, genderScore: x.genderScore })),
      bodies: r.body.map((b) => ({ box: b.box, score: b.score, head: b.keypoints.filter((k) => ['nose', 'leftEye', 'rightEye', 'leftEar', 'rightEar'].includes(k.part)).map((k) => [k.part, Math.round(k.position[0]), Math.round(k.position[1]), Math.round(k.score * 100) / 100]) })) };
    console.log(JSON.stringify(out));
    if (process.env.DUMP && r.face.length) {
      // the face crop faceres saw (0..1, facemesh input size)
      for (let j = 0; j < r.face.length; j++) {
        const ft = r.face[j].tensor; if (!ft) continue;
        fs.writeFileSync(`${f}.face${j}.f32`, Buffer.from((await ft.data()).buffer));
      }
    }
    tf.dispose([t, tf32]);
  }
})().catch((e) => { console.error(e); process.exit(1); });
