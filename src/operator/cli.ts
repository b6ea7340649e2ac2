/**
 * `npm run paymaster -- <command>`: the operator's tool for the on-chain half of the service.
 * runCli parses, dispatches to one command and turns every expected failure into one line on
 * stderr and a non-zero status (2: the command line is wrong, 1: the command failed). It takes
 * the environment and the output streams as arguments, so tests run it in process or as a child.
 */
import { readFileSync } from "node:fs";
import { type Address, getAddress } from "viem";
import {
  addressFlag,
  amountFlag,
  integerFlag,
  type ParsedCommand,
  parseCommandLine,
  shapeOf,
  UsageError,
} from "./args.ts";
import { judge, readPaymasterState, serviceSigner } from "./check.ts";
import {
  connect,
  connectWithKey,
  type Env,
  type Io,
  OperatorError,
  readConfig,
  requirePaymaster,
  resolveTarget,
} from "./context.ts";
import * as owner from "./paymaster-commands.ts";
import { MAX_SWEEP_COUNT, planSweep, SWEEP_KEY_VARIABLE, sendSweep, signSweep } from "./sweep.ts";

export async function runCli(
  argv: readonly string[],
  env: Env,
  io: Io,
  stdin?: () => string,
): Promise<number> {
  try {
    const parsed = parseCommandLine(argv);
    if (parsed.kind === "help") {
      io.out(parsed.text);
      return 0;
    }
    await run(parsed.command, env, io, stdin ?? (() => readFileSync(0, "utf8")));
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`error: ${err.message}`);
      return 2;
    }
    if (err instanceof OperatorError) {
      io.err(`error: ${err.message}`);
      return 1;
    }
    // Not foreseen: still one line by default; the stack only on request.
    io.err(`unexpected error: ${(err as Error)?.message?.split("\n")[0] ?? String(err)}`);
    if (env.PAYMASTER_CLI_DEBUG === "1") io.err(String((err as Error)?.stack));
    return 1;
  }
}

async function run(cmd: ParsedCommand, env: Env, io: Io, stdin: () => string): Promise<void> {
  const f = cmd.flags;
  if (cmd.name === "sweep-sign") {
    // The command line first (the plan is a file it names), then the environment.
    const plan = readJson("--plan", f.plan!, stdin);
    const xprv = env[SWEEP_KEY_VARIABLE];
    if (!xprv)
      throw new OperatorError(
        `set ${SWEEP_KEY_VARIABLE} to the account-level extended private key (m/44'/60'/0')`,
      );
    const signed = await signSweep(
      plan as never,
      xprv,
      addressFlag("--paymaster", cmd.connection.paymaster!),
    );
    io.err(
      `signed ${signed.transactions.length} transfers of ${signed.totalValue} wei in all into the deposit of ` +
        `${signed.paymaster} at EntryPoint ${signed.entryPoint} on chain ${signed.chainId}`,
    );
    io.out(JSON.stringify(signed, null, 2));
    return;
  }

  const target = resolveTarget(cmd.connection, readConfig(env));
  switch (cmd.name) {
    case "deploy":
      return owner.deploy(
        await connectWithKey(target, env),
        {
          signer: addressFlag("--signer", f.signer!),
          owner: f.owner ? addressFlag("--owner", f.owner) : undefined,
        },
        io,
      );
    case "deposit":
      return owner.deposit(await connectWithKey(target, env), amountFlag("--amount", f.amount!), io);
    case "stake":
      return owner.stake(
        await connectWithKey(target, env),
        {
          amountWei: amountFlag("--amount", f.amount!),
          unstakeDelaySec: integerFlag("--unstake-delay", f["unstake-delay"]!, 1, 2 ** 32 - 1),
        },
        io,
      );
    case "unlock-stake":
      return owner.unlockStake(await connectWithKey(target, env), io);
    case "withdraw-stake":
      return owner.withdrawStake(await connectWithKey(target, env), addressFlag("--to", f.to!), io);
    case "withdraw":
      return owner.withdraw(
        await connectWithKey(target, env),
        { to: addressFlag("--to", f.to!), amountWei: amountFlag("--amount", f.amount!) },
        io,
      );
    case "set-signer":
      return owner.setSigner(
        await connectWithKey(target, env),
        addressFlag("the address argument", cmd.address!),
        io,
      );
    case "rotate-signer":
      return owner.rotateSigner(
        await connectWithKey(target, env),
        {
          signer: addressFlag("the address argument", cmd.address!),
          previousValidForSec: integerFlag(
            "--previous-valid-for",
            f["previous-valid-for"]!,
            1,
            owner.MAX_PREVIOUS_VALID_FOR_SEC,
          ),
        },
        io,
      );
    case "check":
      return check(cmd, target, io);
    case "sweep-plan": {
      const count = integerFlag("--count", f.count!, 1, MAX_SWEEP_COUNT);
      const fromIndex = integerFlag("--from-index", f["from-index"] ?? "0", 0, 2 ** 31 - count);
      const plan = await planSweep(
        await connect(target),
        {
          xpub: f.xpub!,
          fromIndex,
          count,
          maxFeePerGasWei: f["fee-per-gas"] ? amountFlag("--fee-per-gas", f["fee-per-gas"]) : undefined,
          maxPriorityFeePerGasWei: f["priority-fee-per-gas"]
            ? amountFlag("--priority-fee-per-gas", f["priority-fee-per-gas"])
            : undefined,
        },
        io,
      );
      io.err(
        `${plan.transactions.length} of ${plan.count} addresses to sweep, ${plan.totalValue} wei in all ` +
          `(each keeps under ${plan.gasCostWei} wei for gas)`,
      );
      io.out(JSON.stringify(plan, null, 2));
      return;
    }
    case "sweep-send": {
      const signed = readJson("--signed", f.signed!, stdin);
      return sendSweep(await connect(target), signed as never, io);
    }
  }
}

async function check(cmd: ParsedCommand, target: ReturnType<typeof resolveTarget>, io: Io): Promise<void> {
  const f = cmd.flags;
  const paymaster = requirePaymaster(target);
  const expected: { address: Address; source: string } = f.signer
    ? { address: addressFlag("--signer", f.signer), source: "--signer" }
    : serviceSigner(target);
  const chain = target.config.chains.find((x) => x.chainId === target.chainId)!;
  const c = await connect(target);
  const state = await readPaymasterState(c, paymaster);
  const findings = judge(state, {
    entryPoint: target.entryPoint,
    version: target.version,
    signer: getAddress(expected.address),
    signerSource: expected.source,
    minDepositWei: f["min-deposit"] ? amountFlag("--min-deposit", f["min-deposit"]) : 1n,
    // By default the minimums readiness holds the paymaster to (CHAIN_<id>_PAYMASTER_MIN_*).
    minStakeWei: f["min-stake"] ? amountFlag("--min-stake", f["min-stake"]) : chain.paymasterMinStakeWei,
    minUnstakeDelaySec: f["min-unstake-delay"]
      ? integerFlag("--min-unstake-delay", f["min-unstake-delay"], 0, 2 ** 32 - 1)
      : chain.paymasterMinUnstakeDelaySec,
    currency: target.currency,
    decimals: target.decimals,
  });
  io.out(`paymaster ${paymaster} on chain ${target.chainId}, EntryPoint v${target.version}`);
  for (const finding of findings) io.out(`${finding.level.toUpperCase().padEnd(4)}  ${finding.text}`);
  const failures = findings.filter((x) => x.level === "fail").length;
  if (failures > 0) throw new OperatorError(`check failed: ${failures} problem${failures === 1 ? "" : "s"}`);
  io.out("OK");
}

/**
 * The JSON file a flag names ("-": standard input). Its name is not repeated in a message: it is
 * typed on the command line like any other value. A file that cannot be read is a command-line
 * mistake (exit 2); one that is not JSON is not (exit 1).
 */
function readJson(flag: string, path: string, stdin: () => string): unknown {
  let text: string;
  try {
    text = path === "-" ? stdin() : readFileSync(path, "utf8");
  } catch {
    throw new UsageError(`${flag}: cannot read the file it names (got ${shapeOf(path)})`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new OperatorError(`${flag}: the file is not JSON`);
  }
}
