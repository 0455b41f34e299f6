// Approval prompts: a checkpoint or a budget proposal becomes one notification with Approve and
// Reject; the tree answers the same prompts. Each approval is answered at most once from here.

import { formatLimits, formatUsage, oneLineJson, shortId } from "./format";
import type { BudgetApprovalRequest, CheckpointRequest } from "./protocol";
import type { RunModel } from "./runModel";
import type { ServerCommands } from "./serverCommands";

export const APPROVE = "Approve";
export const REJECT = "Reject";

export type Approval =
  | { kind: "checkpoint"; runId: string; name: string }
  | { kind: "proposal"; runId: string; proposalId: string };

export interface ApprovalUi {
  /** Shows a notification with buttons; resolves with the button chosen, or undefined if dismissed. */
  ask(message: string, ...buttons: string[]): PromiseLike<string | undefined>;
  error(message: string): void;
  /** Whether new prompts pop up as notifications (`piflow.approvals.notify`). */
  notify(): boolean;
}

function key(approval: Approval): string {
  return approval.kind === "checkpoint"
    ? `${approval.runId}/checkpoint/${approval.name}`
    : `${approval.runId}/proposal/${approval.proposalId}`;
}

export class ApprovalFlow {
  /** Prompts shown, so a repeated notification or snapshot does not prompt twice. */
  private readonly prompted = new Set<string>();
  /** Answers sent or being sent: a second click, from the tree or a notification, sends nothing. */
  private readonly answered = new Set<string>();

  constructor(
    private readonly model: RunModel,
    private readonly server: () => ServerCommands | undefined,
    private readonly ui: ApprovalUi,
  ) {}

  /** Prompts for every pending approval not yet prompted for (after a snapshot or a listing). */
  promptPending(): void {
    for (const run of this.model.all()) {
      for (const checkpoint of run.checkpoints) {
        this.checkpoint({ runId: run.runId, uri: run.uri, ...checkpoint });
      }
      for (const proposal of run.proposals) {
        this.budgetApproval({ runId: run.runId, proposal });
      }
    }
  }

  checkpoint(request: CheckpointRequest): void {
    const approval: Approval = { kind: "checkpoint", runId: request.runId, name: request.name };
    const workflow = this.model.get(request.runId)?.workflowName ?? "workflow";
    const context = request.context === null ? "" : ` — context: ${oneLineJson(request.context)}`;
    this.prompt(approval, `Workflow ${workflow} checkpoint ${request.name}: ${request.prompt}${context}`);
  }

  budgetApproval(request: BudgetApprovalRequest): void {
    const { proposal } = request;
    const approval: Approval = { kind: "proposal", runId: request.runId, proposalId: proposal.proposalId };
    const workflow = this.model.get(request.runId)?.workflowName ?? "workflow";
    this.prompt(
      approval,
      `Workflow ${workflow} (${shortId(request.runId)}) asks to raise its budget: ` +
        `${formatLimits(proposal.previous)} → ${formatLimits(proposal.proposed)} ` +
        `(consumed: ${formatUsage(proposal.consumed)}).`,
    );
  }

  /** Sends the answer unless one was already sent; true when the server accepted it. */
  async answer(approval: Approval, approved: boolean): Promise<boolean> {
    const id = key(approval);
    const server = this.server();
    if (!server || this.answered.has(id)) return false;
    this.answered.add(id);
    try {
      if (approval.kind === "checkpoint") {
        await server.answerCheckpoint(approval.runId, approval.name, approved);
        this.model.answeredCheckpoint(approval.runId, approval.name);
      } else {
        await server.answerProposal(approval.runId, approval.proposalId, approved);
        this.model.answeredProposal(approval.runId, approval.proposalId);
      }
      return true;
    } catch (error) {
      this.answered.delete(id);
      this.ui.error(`piflow could not send the answer: ${error instanceof Error ? error.message : String(error)}`);
      return false;
    }
  }

  private prompt(approval: Approval, message: string): void {
    const id = key(approval);
    if (this.prompted.has(id) || !this.ui.notify()) return;
    this.prompted.add(id);
    void Promise.resolve(this.ui.ask(message, APPROVE, REJECT)).then((choice) => {
      if (choice === APPROVE || choice === REJECT) return this.answer(approval, choice === APPROVE);
      return false;
    });
  }
}
