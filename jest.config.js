/**
 * Tests drive the real addon, server and clients, two files at a time: while one waits on its servers and engine
 * processes, the other computes (on the 2-core machines, 0.79x the time of one file at a time: bench/README.md,
 * "Set-up and suite time"). Three were no faster: the two keep both cores busy (bench/README.md, "Where the suite's
 * CPU goes"). global-setup.ts builds dist/ and generates the test models once per run; test/sequencer.js runs the
 * node-gyp check last.
 */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  testSequencer: '<rootDir>/test/sequencer.js',
  maxWorkers: 2,
  testTimeout: 300000,
  transform: { '^.+\\.ts$': ['ts-jest', { diagnostics: { warnOnly: false } }] },
};
