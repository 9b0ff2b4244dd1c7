import { approvalsProjection } from './approvals/approvals-projection.ts';
import { identityProjection } from './identity/identity-projection.ts';
import { runsProjection } from './runs/runs-projection.ts';
import type { Projection } from './runtime/projection.ts';

/** Every read model of the service; the projector role runs them from one durable consumer (see Projector). */
export const PROJECTIONS: readonly Projection[] = [identityProjection, runsProjection, approvalsProjection];

export function projectionNamed(name: string): Projection | undefined {
  return PROJECTIONS.find((p) => p.name === name);
}
