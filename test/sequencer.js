/**
 * Jest's own order (failed first, then slowest first), except test/project/binding-gyp.test.ts last: its
 * node-gyp build runs in the background while the other suites run (test/helpers/gyp-build.ts).
 */
const Sequencer = require('@jest/test-sequencer').default;

class GypLast extends Sequencer {
  sort(tests) {
    const sorted = super.sort(tests);
    const isGyp = (t) => t.path.endsWith('binding-gyp.test.ts');
    return [...sorted.filter((t) => !isGyp(t)), ...sorted.filter(isGyp)];
  }
}

module.exports = GypLast;
