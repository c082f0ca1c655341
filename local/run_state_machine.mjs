// Runs a state machine definition with aws-local-stepfunctions, a real ASL interpreter: every path,
// intrinsic function, Choice, Retry and Catch is evaluated as Step Functions would. Each Task state is
// bound to `python -m local.tasks` (or the module $LOCAL_TASKS names), which carries out the service call here.
//
// node run_state_machine.mjs DEFINITION.json INPUT.json CONTEXT.json EXECUTION_NAME RESULT.json
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StateMachine } from 'aws-local-stepfunctions';

// aws-local-stepfunctions 3.0.0 removes every backslash from an intrinsic function's string result
// (BaseIntrinsicFunction.call: `result.replaceAll("\\", "")`), meant to undo the escapes of a template literal
// but applied to the values in it too: a JSON-encoded cause passed through States.Format or States.JsonToString
// loses its escapes ("in main\n    answer" -> "in mainn    answer", quotes unescaped). Step Functions unescapes the
// literal only, and this project's templates hold no backslash, so that one call keeps the string as it is.
const replaceAll = String.prototype.replaceAll;
String.prototype.replaceAll = function (pattern, replacement) {
  return pattern === '\\' && replacement === '' ? String(this) : replaceAll.call(this, pattern, replacement);
};

const [definitionPath, inputPath, contextPath, executionName, resultPath] = process.argv.slice(2);
const definition = JSON.parse(readFileSync(definitionPath, 'utf8'));
const input = JSON.parse(readFileSync(inputPath, 'utf8'));
const python = process.env.PYTHON || 'python3';
const handlersModule = process.env.LOCAL_TASKS || 'local.tasks'; // tests bind Task states to answering stubs
const scratch = mkdtempSync(join(tmpdir(), 'sfn-'));
let calls = 0;
let finished = false; // set when the execution ends: later exits of stopped task processes mean nothing
const running = new Set(); // task processes; a state that times out or an execution that ends stops them
const stopAll = () => {
  finished = true;
  running.forEach((child) => child.kill('SIGTERM'));
};
process.on('exit', stopAll);

// Ctrl-C (SIGINT to the terminal's process group) or a SIGTERM: the execution is stopped as StopExecution stops
// one. Each running task process stops its job as SageMaker does (SIGTERM to the hosts: training checkpoints the
// step in flight); once every one has ended, the result says ABORTED and the interpreter exits.
let interrupted = false;
const interrupt = (signal) => {
  if (interrupted) return;
  interrupted = true;
  stopAll();
  const whenStopped = setInterval(() => {
    if (running.size) return;
    clearInterval(whenStopped);
    writeFileSync(resultPath, JSON.stringify({ status: 'ABORTED', error: 'Interrupted', cause: `by ${signal}` }));
    process.exit(130);
  }, 100);
};
process.on('SIGINT', interrupt);
process.on('SIGTERM', interrupt);

class TaskError extends Error {
  constructor(error, cause) {
    super(cause);
    this.name = error;
  }
}

function runTask(state, resource, taskInput) {
  const resultFile = join(scratch, `task-${++calls}.json`);
  return new Promise((resolve, reject) => {
    const child = spawn(python, ['-m', handlersModule, contextPath, resultFile], { stdio: ['pipe', 'inherit', 'inherit'] });
    running.add(child);
    child.stdin.end(JSON.stringify({ state, resource, input: taskInput }));
    child.on('error', reject);
    child.on('close', () => {
      running.delete(child);
      if (finished) return;
      let answer;
      try {
        answer = JSON.parse(readFileSync(resultFile, 'utf8'));
      } catch (e) {
        reject(new TaskError('States.TaskFailed', `local handler for ${state} wrote no result`));
        return;
      }
      if (answer.error) reject(new TaskError(answer.error.Error, answer.error.Cause));
      else resolve(answer.ok);
    });
  });
}

// Node's timers hold at most 2^31 - 1 ms (24.8 days); a longer TimeoutSeconds (the training state allows
// SageMaker's longest spot wait) would fire at once. Here, where nothing runs that long, cap it.
const MAX_TIMER_SECONDS = Math.floor((2 ** 31 - 1) / 1000);
for (const state of Object.values(definition.States)) {
  if (state.TimeoutSeconds > MAX_TIMER_SECONDS) state.TimeoutSeconds = MAX_TIMER_SECONDS;
}

const handlers = {};
const waits = {};
const retries = {};
for (const [name, state] of Object.entries(definition.States)) {
  if (state.Type === 'Task') handlers[name] = (taskInput) => runTask(name, state.Resource, taskInput);
  if (state.Type === 'Wait') waits[name] = 100; // polling loops: the local calls finish before they return
  if (state.Retry) retries[name] = 500;
}

const machine = new StateMachine(definition, { validationOptions: { checkArn: false } });
const execution = machine.run(input, {
  overrides: { taskResourceLocalHandlers: handlers, waitTimeOverrides: waits, retryIntervalOverrides: retries },
  context: {
    Execution: {
      Id: `arn:aws:states:local:000000000000:execution:local:${executionName}`,
      Name: executionName,
      Input: input,
      StartTime: new Date().toISOString(),
    },
    StateMachine: { Id: 'arn:aws:states:local:000000000000:stateMachine:local', Name: 'local' },
  },
});

const started = {};
const failed = new Set(); // a caught failure exits its state too: it was shown as ✗, never also as ✓
const seconds = (ms) => (ms / 1000).toFixed(1).padStart(6);
(async () => {
  for await (const event of execution.eventLogs) {
    const name = event.state?.name;
    if (event.type === 'StateEntered') {
      started[name] = event.timestamp;
      failed.delete(name);
      if (event.state.type === 'Task') console.log(`▶ ${name}`);
    } else if (event.type === 'StateExited' && event.state.type !== 'Wait' && !failed.has(name)) {
      console.log(`✓ ${seconds(event.timestamp - started[name])} s  ${name}`);
    } else if (event.type === 'StateFailed') {
      failed.add(name);
      console.log(`✗ ${seconds(event.timestamp - started[name])} s  ${name}: ${event.Error}`);
    } else if (event.type === 'StateRetried') {
      console.log(`↻ ${name}: retry ${event.retry.attempt}`);
    } else if (event.type === 'StateCaught') {
      console.log(`→ ${name}: caught, going to ${event.catch.catcher.Next}`);
    }
  }
})();

try {
  const output = await execution.result;
  stopAll();
  writeFileSync(resultPath, JSON.stringify({ status: 'SUCCEEDED', output }, null, 2));
} catch (error) {
  if (interrupted) await new Promise(() => {}); // the interrupt writes the result once the tasks have stopped
  stopAll();
  const failure = error.cause ?? error; // the execution's error and cause, as DescribeExecution reports them
  writeFileSync(resultPath, JSON.stringify({ status: 'FAILED', error: failure.name, cause: failure.message }, null, 2));
  process.exitCode = 1;
}
