import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseDuration } from '../../src/util/duration.ts';

describe('parseDuration', () => {
  it('reads Go-style durations into milliseconds', () => {
    assert.equal(parseDuration('10h'), 36_000_000);
    assert.equal(parseDuration('1m30s'), 90_000);
    assert.equal(parseDuration('250ms'), 250);
    assert.equal(parseDuration('1.5s'), 1500);
    assert.equal(parseDuration('1h2m3s4ms'), 3_723_004);
    assert.equal(parseDuration('0'), 0);
    // Microseconds as Go writes them: "us", the micro sign, the Greek mu.
    assert.equal(parseDuration('1500us'), 1.5);
    assert.equal(parseDuration('1500\u00b5s'), 1.5);
    assert.equal(parseDuration('1500\u03bcs'), 1.5);
  });

  it('refuses anything else, naming the text and the expected form', () => {
    for (const bad of ['', '10', '5 m', '1d', 'h', '-1s', '1s junk']) {
      assert.throws(
        () => parseDuration(bad),
        (err: unknown) => {
          assert.ok(err instanceof RangeError);
          assert.match(err.message, new RegExp(`invalid duration "${bad}": write it like 10h`));
          return true;
        },
      );
    }
  });
});
