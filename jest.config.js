/**
 * Tests drive the real addon, server and clients, one file at a time (`--runInBand`); global-setup.ts
 * builds dist/ and generates the test models once per run; test/sequencer.js runs the node-gyp check last.
 */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  testSequencer: '<rootDir>/test/sequencer.js',
  testTimeout: 300000,
  transform: { '^.+\\.ts$': ['ts-jest', { diagnostics: { warnOnly: false } }] },
};
