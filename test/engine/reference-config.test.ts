/**
 * The float64 reference reads both layouts of config.json (test/reference/ref_families.py, rope_settings): the test
 * models' (transformers 4: rope_theta, rope_scaling, rope_local_base_freq at the top) and transformers 5's, which
 * bench/gpu/make_models.py writes on the GPU machine (rope_parameters, one per layer type for Gemma 3). Every text
 * family's test model, its config put in the v5 layout by make_models.py's own v5_fields: the same logits. (Before the
 * reference read rope_parameters, Gemma 3 failed with a KeyError and Phi-3, OLMo 2 and SmolLM3 were off by 1-3.)
 */
import { execFileSync } from 'child_process';
import * as path from 'path';
import { tinyModelNames } from '../../src/testmodels/specs';
import { keepFreedMemory } from '../helpers/keep-freed-memory';
import { debianPython, pythonEnv, referenceDir, tinyModel } from '../helpers/models';

test("the reference gives the same logits under transformers 5's config layout (make_models.py's) as under 4's, every text family", () => {
  const out = JSON.parse(execFileSync(debianPython, [path.join(referenceDir, 'config_forms.py'), ...tinyModelNames.map(tinyModel)], { encoding: 'utf8', env: keepFreedMemory(pythonEnv()) }));
  expect(Object.keys(out).sort()).toEqual([...tinyModelNames].sort());
  for (const [name, r] of Object.entries<any>(out)) {
    expect({ name, diff: r.max_abs_diff }).toEqual({ name, diff: 0 });
    expect(r.rope_parameters).toBeDefined();
  }
  // The layouts that broke it: Gemma 3's per layer type, Phi-3's longrope with its original context inside.
  expect(Object.keys(out['tiny-gemma3'].rope_parameters).sort()).toEqual(['full_attention', 'sliding_attention']);
  expect(out['tiny-phi3'].rope_parameters).toMatchObject({ rope_type: 'longrope', original_max_position_embeddings: 64 });
}, 120_000);
