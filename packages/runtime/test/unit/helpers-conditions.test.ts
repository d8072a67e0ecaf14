import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Condition } from '../../src/api/object.ts';
import {
  findCondition,
  formatTime,
  isConditionFalse,
  isConditionPresentAndEqual,
  isConditionTrue,
  removeCondition,
  setCondition,
} from '../../src/helpers/conditions.ts';

const T0 = new Date('2024-05-01T10:00:00.000Z');
const T1 = new Date('2024-05-01T10:05:00.000Z');
const T2 = new Date('2024-05-01T10:09:30.250Z');
const at = (d: Date) => () => d;

describe('setCondition', () => {
  it('adds a new condition with lastTransitionTime = now', () => {
    const result = setCondition(
      undefined,
      { type: 'Ready', status: 'False', reason: 'Creating', message: 'wait' },
      at(T0),
    );
    assert.deepEqual(result, [
      {
        type: 'Ready',
        status: 'False',
        reason: 'Creating',
        message: 'wait',
        lastTransitionTime: '2024-05-01T10:00:00Z',
      },
    ]);
  });

  it('keeps lastTransitionTime when the status does not change, updating reason/message/generation', () => {
    const c0 = setCondition([], { type: 'Ready', status: 'False', reason: 'Creating', message: 'a' }, at(T0));
    const c1 = setCondition(
      c0,
      { type: 'Ready', status: 'False', reason: 'WaitingForPods', message: 'b', observedGeneration: 3 },
      at(T1),
    );
    assert.deepEqual(c1, [
      {
        type: 'Ready',
        status: 'False',
        reason: 'WaitingForPods',
        message: 'b',
        observedGeneration: 3,
        lastTransitionTime: '2024-05-01T10:00:00Z',
      },
    ]);
  });

  it('moves lastTransitionTime when the status changes', () => {
    const c0 = setCondition([], { type: 'Ready', status: 'False', reason: 'Creating', message: '' }, at(T0));
    const c1 = setCondition(c0, { type: 'Ready', status: 'True', reason: 'Ready', message: '' }, at(T1));
    assert.equal(c1[0]!.lastTransitionTime, '2024-05-01T10:05:00Z');
    const c2 = setCondition(c1, { type: 'Ready', status: 'True', reason: 'Ready', message: 'still' }, at(T2));
    assert.equal(c2[0]!.lastTransitionTime, '2024-05-01T10:05:00Z');
    const c3 = setCondition(c2, { type: 'Ready', status: 'Unknown', reason: 'Lost', message: '' }, at(T2));
    assert.equal(c3[0]!.lastTransitionTime, '2024-05-01T10:09:30Z');
  });

  it('uses an explicit lastTransitionTime only on a transition', () => {
    const c0 = setCondition(
      [],
      { type: 'A', status: 'True', reason: 'R', message: '', lastTransitionTime: '2020-01-01T00:00:00Z' },
      at(T0),
    );
    assert.equal(c0[0]!.lastTransitionTime, '2020-01-01T00:00:00Z');
    const c1 = setCondition(
      c0,
      { type: 'A', status: 'True', reason: 'R', message: '', lastTransitionTime: '2021-01-01T00:00:00Z' },
      at(T1),
    );
    assert.equal(c1[0]!.lastTransitionTime, '2020-01-01T00:00:00Z');
  });

  it('an absent observedGeneration removes it, as in apimachinery', () => {
    const c0 = setCondition(
      [],
      { type: 'A', status: 'True', reason: 'R', message: '', observedGeneration: 2 },
      at(T0),
    );
    const c1 = setCondition(c0, { type: 'A', status: 'True', reason: 'R', message: '' }, at(T1));
    assert.equal('observedGeneration' in c1[0]!, false);
  });

  it('is pure, keeps order, and is a deep-equal no-op when nothing changed', () => {
    const input: Condition[] = [
      { type: 'A', status: 'True', reason: 'R', message: 'm', lastTransitionTime: '2024-01-01T00:00:00Z' },
      { type: 'B', status: 'False', reason: 'R', message: 'm', lastTransitionTime: '2024-01-01T00:00:00Z' },
    ];
    const snapshot = structuredClone(input);
    const same = setCondition(input, { type: 'A', status: 'True', reason: 'R', message: 'm' }, at(T2));
    assert.notEqual(same, input);
    assert.deepEqual(same, input);
    const changed = setCondition(input, { type: 'A', status: 'False', reason: 'X', message: 'n' }, at(T2));
    assert.deepEqual(
      changed.map((c) => c.type),
      ['A', 'B'],
    );
    assert.deepEqual(input, snapshot);
    changed[1]!.message = 'mutated';
    assert.equal(input[1]!.message, 'm');
    const added = setCondition(input, { type: 'C', status: 'True', reason: 'R', message: '' }, at(T2));
    assert.deepEqual(
      added.map((c) => c.type),
      ['A', 'B', 'C'],
    );
  });

  it('defaults to the system clock', () => {
    const before = Date.now();
    const [c] = setCondition([], { type: 'A', status: 'True', reason: 'R', message: '' });
    const t = Date.parse(c!.lastTransitionTime);
    assert.ok(t >= Math.floor(before / 1000) * 1000 && t <= Date.now());
  });
});

describe('condition queries', () => {
  const conditions: Condition[] = [
    { type: 'Ready', status: 'True', reason: 'R', message: '', lastTransitionTime: formatTime(T0) },
    { type: 'Degraded', status: 'False', reason: 'R', message: '', lastTransitionTime: formatTime(T0) },
    { type: 'Progressing', status: 'Unknown', reason: 'R', message: '', lastTransitionTime: formatTime(T0) },
  ];

  it('find/isTrue/isFalse/isPresentAndEqual', () => {
    assert.equal(findCondition(conditions, 'Ready'), conditions[0]);
    assert.equal(findCondition(conditions, 'Missing'), undefined);
    assert.equal(findCondition(undefined, 'Ready'), undefined);
    assert.equal(isConditionTrue(conditions, 'Ready'), true);
    assert.equal(isConditionTrue(conditions, 'Degraded'), false);
    assert.equal(isConditionTrue(conditions, 'Missing'), false);
    assert.equal(isConditionFalse(conditions, 'Degraded'), true);
    assert.equal(isConditionFalse(conditions, 'Progressing'), false);
    assert.equal(isConditionFalse(undefined, 'Ready'), false);
    assert.equal(isConditionPresentAndEqual(conditions, 'Progressing', 'Unknown'), true);
    assert.equal(isConditionPresentAndEqual(conditions, 'Missing', 'Unknown'), false);
  });

  it('removeCondition returns a new array without it', () => {
    const result = removeCondition(conditions, 'Degraded');
    assert.deepEqual(
      result.map((c) => c.type),
      ['Ready', 'Progressing'],
    );
    assert.equal(conditions.length, 3);
    assert.deepEqual(removeCondition(conditions, 'Missing'), conditions);
    assert.deepEqual(removeCondition(undefined, 'Ready'), []);
  });
});
