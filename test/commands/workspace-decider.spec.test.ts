import { expect } from 'chai';
import { AlreadyExistsError, PauseInThePastError, WorkspaceNotFoundError } from '../../commands/errors.ts';
import { runStartsPausedForMs, workspaceDecider, type WorkspaceCommand } from '../../commands/workspace/workspace-decider.ts';
import { killSwitchStop } from '../../commands/workspace/kill-switch.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';

const meta = { actor: { kind: 'operator' as const, id: 'op' }, correlationId: 'c' };
const created = recorded('WorkspaceCreated', { name: 'w' }, { account_id: null } as never);
const engagedEvent = recorded('KillSwitchEngaged', { reason: 'incident' });
const create: WorkspaceCommand = { type: 'CreateWorkspace', workspaceId: 'ws', name: 'Acme', meta };
const killSwitch = (engaged: boolean, reason = 'why'): WorkspaceCommand => ({ type: 'SetKillSwitch', workspaceId: 'ws', engaged, reason, meta });

describe('workspace decider (specs)', () => {
  const spec = deciderSpec(workspaceDecider);

  it('creates a workspace once', () => spec.given([]).when(create).then([{ type: 'WorkspaceCreated', data: { name: 'Acme' } }]));
  it('refuses to create it twice', () => spec.given([created]).when(create).thenThrows(AlreadyExistsError));

  it('engages the kill switch with its reason', () => spec.given([created]).when(killSwitch(true, 'incident')).then([{ type: 'KillSwitchEngaged', data: { reason: 'incident' } }]));
  it('engaging an engaged switch appends nothing', () => spec.given([created, engagedEvent]).when(killSwitch(true)).thenNothing());
  it('releases an engaged switch', () => spec.given([created, engagedEvent]).when(killSwitch(false, 'fixed')).then([{ type: 'KillSwitchReleased', data: { reason: 'fixed' } }]));
  it('releasing a released switch appends nothing', () => spec.given([created]).when(killSwitch(false)).thenNothing());
  it('refuses the kill switch of an unknown workspace', () => spec.given([]).when(killSwitch(true)).thenThrows(WorkspaceNotFoundError));

  const NOW = '2026-11-22T12:00:00.000Z';
  const pause = (until: string): WorkspaceCommand => ({ type: 'PauseRunStarts', workspaceId: 'ws', until, reason: 'incident', now: NOW, meta });
  const resume: WorkspaceCommand = { type: 'ResumeRunStarts', workspaceId: 'ws', reason: 'over', meta };
  const pausedUntil = (until: string) => recorded('RunStartsPaused', { until, reason: 'incident' });

  it('pauses run starts until a time in the future', () =>
    spec.given([created]).when(pause('2026-11-22T12:10:00.000Z')).then([{ type: 'RunStartsPaused', data: { until: '2026-11-22T12:10:00.000Z', reason: 'incident' } }]));
  it('refuses a pause that would end in the past', () => spec.given([created]).when(pause('2026-11-22T11:59:59.000Z')).thenThrows(PauseInThePastError));
  it('pausing again until the same time appends nothing', () => spec.given([created, pausedUntil('2026-11-22T12:10:00.000Z')]).when(pause('2026-11-22T12:10:00.000Z')).thenNothing());
  it('resumes a paused workspace', () => spec.given([created, pausedUntil('2026-11-22T12:10:00.000Z')]).when(resume).then([{ type: 'RunStartsResumed', data: { reason: 'over' } }]));
  it('resuming a workspace that is not paused appends nothing', () => spec.given([created]).when(resume).thenNothing());
  it('refuses to pause an unknown workspace', () => spec.given([]).when(pause('2026-11-22T12:10:00.000Z')).thenThrows(WorkspaceNotFoundError));

  it('the pause rule: runs wait until the pause ends, and not after a resume', () => {
    const fold = (events: ReturnType<typeof recorded>[]) => events.reduce(workspaceDecider.evolve, workspaceDecider.initialState());
    const paused = fold([created, pausedUntil('2026-11-22T12:10:00.000Z')]);
    expect(runStartsPausedForMs(paused, Date.parse(NOW))).to.equal(600_000);
    expect(runStartsPausedForMs(paused, Date.parse('2026-11-22T12:10:00.001Z'))).to.equal(0);
    expect(runStartsPausedForMs(fold([created, pausedUntil('2026-11-22T12:10:00.000Z'), recorded('RunStartsResumed', { reason: 'r' })]), Date.parse(NOW))).to.equal(0);
  });

  it('decides every command on the workspace’s own subject', () => {
    for (const command of [create, killSwitch(true), { type: 'SetDistinctApprover', workspaceId: 'ws', required: true, meta } as const]) {
      expect(workspaceDecider.streamOf(command)).to.deep.equal({ workspaceId: 'ws', accountId: null, aggregate: { type: 'workspace', id: 'ws' } });
    }
  });

  it('the kill-switch rule: engaged stops auto-apply with a reason, released does not', () => {
    const fold = (events: ReturnType<typeof recorded>[]) => events.reduce(workspaceDecider.evolve, workspaceDecider.initialState());
    expect(killSwitchStop(fold([created, engagedEvent]))).to.equal('the workspace kill switch is engaged');
    expect(killSwitchStop(fold([created, engagedEvent, recorded('KillSwitchReleased', { reason: 'ok' })]))).to.equal(null);
  });
});
