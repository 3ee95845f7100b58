#!/usr/bin/env bash
# Deliberate breakages, one at a time, each of which one test must catch.
# The tracked files are copied (as they are in the working tree) to
# build-mutants/tree; for each mutant one file of the copy is changed with
# sed, the copy is built (ccache: only what the change touches compiles),
# the test that must catch it runs, and the file is put back. The sources
# here are only read. Prints "MUTANT -> caught by TEST" or "NOT CAUGHT";
# exits 1 if any mutant survives (or does not apply, or does not build).
#
# Usage: scripts/mutants.sh [--quick] [MUTANT...]
#   --quick: leaves out the slowest multi-host scripts (two_hosts_demo_train,
#            slurm); about 5 minutes on 2 cores with a warm ccache.
#   MUTANT...: only these (names as printed by --list).
#   --list: the mutants, and exit.
# Kinds of mutant:
#   cxx     sed on a C++ source, rebuild, the ctest (a test that passes on
#           the unchanged copy first: baseline) must fail.
#   script  sed on a multi-host test script (flips one of its checks); the
#           script must exit non-zero and print that check's FAIL line.
#   fuzz    config_fuzzer built with -DTRL_FUZZ_SELFTEST_CRASH=ON aborts on
#           every input; scripts/fuzz.sh must fail.
#   nemesis sed on a C++ source, rebuild, tests/nemesis/nemesis.sh with the
#           given arguments (one short job, a few faults; it passes on the
#           unchanged copy first: baseline) must exit 1 and print the
#           checker's VIOLATION line expected. Needs root (test hosts).
#           The header of tests/nemesis/nemesis.sh (Teeth) says what was
#           tried, what it caught and what not.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
quick=0 list=0
only=()
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    --list) list=1 ;;
    *) only+=("$arg") ;;
  esac
done

# NAME ~ KIND ~ FILE ~ SED EXPRESSION ~ TEST (cxx: ctest name; script and
# nemesis: the script's arguments after BUILD_DIR, then "::" and the FAIL or
# VIOLATION line expected)
# ~ slow (left out by --quick)
mutants=(
  "pdeathsig-removed~cxx~agent/workers/worker_process.cc~s/prctl(PR_SET_PDEATHSIG, SIGKILL);/(void)0;/~LauncherTest.KilledAgentFailsTheJobAndItsWorkersDie~"
  "agent-lease-without-grace~cxx~agent/core/agent_core.cc~s/  } else if (now - \\*expired_looking_since_ >= settings_.lease_grace) {/  } else if (true) {/~AgentCoreTest.TheLeaseRunsOutOnlyAfterItsLengthAndTheGrace~"
  "agent-stop-unfenced~cxx~agent/core/agent_core.cc~s/      if (!ours) break;/      if (false) break;/~AgentCoreTest.AStopOrderOfAnotherGenerationIsIgnored~"
  "agent-datagrams-alone-unacked~cxx~agent/core/agent_core.cc~s/  beat.stream = !(udp_open_ \\&\\& last_datagram_acked);/  beat.stream = !udp_open_;/~AgentCoreTest.HeartbeatsGoOnTheStreamUntilDatagramsAreAcknowledged~"
  "orphan-sweep-removed~cxx~agent/cleanup/orphans.cc~/^int KillOrphansOfGeneration(/a\\  return 0;~WorkerCleanupTest.SubreaperKillsADaemonThatClearedItsEnvironment~"
  "token-check-removed~cxx~common/derived_identity.cc~s/reinterpret_cast<const unsigned char\*>(token.data()), token.size(),/reinterpret_cast<const unsigned char*>(\"x\"), 1,/~AuthTest.AgentsWithoutTheRightTokenAreRefused~"
  "ledger-guardian-blind~cxx~agent/cleanup/job_guardian.cc~s/^    ends.KeepEndsOfZombiesOf(daemon);/    (void)ends;/~FencingTest.RanksThatExitedZeroBeforeTheirFrozenAgentWasKilledSucceed~"
  "ledger-stop-ignored~cxx~agent/cleanup/exit_ledger.cc~s/      if (!exit || Stopping(watched.dir, start.generation) ||/      if (!exit ||/~ExitLedgerTest.NoEndIsKeptOnceTheAgentBeganToStopItsWorkers~"
  "ledger-leader-alone-trusted~cxx~agent/cleanup/exit_ledger.cc~s/          if (LeaderEndedAlone(start.pid)) {/          if (false) {/~ExitLedgerTest.ALeaderThatEndedAloneIsKeptOnlyWhereTheKernelTells~"
  "ledger-alone-leader-read-early~cxx~agent/cleanup/exit_ledger.cc~s/      if (links.threads != 1) {/      if (false) {/~ExitLedgerTest.ALeaderThatEndedAloneIsKeptOnlyWhereTheKernelTells~"
  "last-word-heard-in-plaintext~cxx~coordinator/owner/heartbeat_sessions.cc~s/  if (!hear_last_words_) return \"a last word without TLS\";/  (void)0;/~HeartbeatSessionsTest.NoLastWordIsHeardWithoutTls~"
  "ledger-ending-group-tainted~cxx~agent/cleanup/exit_ledger.cc~s/^  if (OtherThreadsAreEnding(pid)) return false;/  return true;/~ExitLedgerTest.AProcessWhoseThreadsEndWithItsLeaderIsKept~"
  "agent-gone-unsaid~cxx~agent/cleanup/job_guardian.cc~s/^  const int out = socket(word->to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);/  const int out = -1;/~FencingTest.AKilledAgentsRanksGoToASpareWithoutWaitingOutItsLease~"
  "agent-gone-speaks-for-others~cxx~coordinator/job/membership.cc~s/  machines_.OldAgentRanUntil(m, std::max(node->run_on_before_loss, now));/  machines_.OldAgentRanUntil(m, now);/~SparesTest.ADeadAgentsGuardianDoesNotSpeakForTheAgentsBeforeIt~"
  "agent-gone-ignored~cxx~coordinator/owner/core_agents.cc~s/^  machine_.LostAgentGone(m, clock_());/  (void)m;/~FencingTest.AKilledAgentsRanksGoToASpareWithoutWaitingOutItsLease~"
  "reconnect-timer-trusted~cxx~agent/session/agent.cc~s/    } else if (steady_clock::now() - failing_since > replace_after) {/    } else if (false) {/~RestartTest.AnAgentWhoseWallClockRunsAheadRejoinsARestartedCoordinator~"
  "channel-wait-unpolled~cxx~agent/link/agent_channel.cc~/^void ChannelPoller::PollFor(/a\\  usleep(static_cast<useconds_t>(time.count()) * 1000); return;~RestartTest.AnAgentWhoseWallClockRunsAheadRejoinsARestartedCoordinator~"
  "old-agent-not-awaited~cxx~coordinator/owner/core.cc~s/      if (node.from_spare \\&\\& node.old_agent_may_run_until > now) {/      if (false) {/~OldAgentFarewellTest.AHandedOverMachinesOldAgentIsAwaitedWhileItMayRun~"
  "stand-in-without-session~cxx~coordinator/owner/heartbeat_sessions.cc~s/  OfferUdpSession(found->second, machine_rank, change);/  (void)change;/~HeartbeatSessionsTest.ASpareThatStandsForAMachineGetsASessionOfIt~"
  "stand-in-keeps-old-datagrams~cxx~agent/core/agent_core.cc~s/  effects.close_datagrams = true;/  (void)0;/~AgentCoreRoleTest.AStandInTakesTheSessionItsRoleChangeOffers~"
  "ledger-planted-dir-used~cxx~agent/cleanup/exit_ledger.cc~s/  return lstat(dir.c_str(), \&info) == 0 \&\& S_ISDIR(info.st_mode) \&\&/  return true || lstat(dir.c_str(), \&info) == 0 \&\& S_ISDIR(info.st_mode) \&\&/~ExitLedgerTest.APlantedDirectoryIsNeverUsed~"
  "ledger-report-of-another-run~cxx~coordinator/owner/agent_input.cc~s/    if (run_id.empty() || request.report_run_id() != run_id) break;/    (void)run_id;/~RegistrationReportTest.OnlyThisRunsExitsAreTaken~"
  "replacement-before-old-lease~cxx~coordinator/job/membership.cc~s/  return now >= machines_.ReplacementsAllowedAt();/  return true;/~JobRestartTest.AnotherAgentGetsALostMachinesRanksOnlyAfterItsLease~"
  "generation-started-unpersisted~cxx~coordinator/owner/generation_preparer.cc~s/  if (!prepared.kept.ok()) {/  if (false) {/~JobPersistenceTest.AGenerationThatCannotBeKeptDoesNotStart~"
  "slow-work-on-the-owner~cxx~coordinator/owner/offloaded_work.cc~s/  if (!offload_) {/  if (true) {/~CoordinatorOwnerTest.ASlowRendezvousHoldsUpNeitherStatusNorHeartbeats~"
  "agent-queue-unbounded~cxx~coordinator/owner/coordinator.cc~s/  if (!over) return true;/  if (true) return true;/~CoordinatorQueueTest.AFloodingStreamIsPausedAtItsShareOfTheQueue~"
  "paused-stream-read-anyway~cxx~coordinator/ports/grpc_service.cc~s/      if (!more) {/      if (!more \&\& false) {/~AgentBackpressureTest.AFloodingStreamIsReadNoMoreWhileTheOwnerIsHeld~"
  "paused-stream-never-resumed~cxx~coordinator/ports/grpc_service.cc~s/      if (finished_) return;/      return;/~AgentBackpressureTest.TheServerEndsWithStreamsPaused~"
  "stale-preparation-started~cxx~coordinator/owner/generation_preparer.cc~s/  if (!machine_.ReadyToStart(now) ||/  if (false \&\&/~CoordinatorCoreOffloadTest.AGenerationPreparedForAJobThatChangedDoesNotStart~"
  "generation-fencing-removed~cxx~coordinator/job/state_machine.cc~s/if (generation != generation_) return nullptr;/if (false) return nullptr;/~JobStateMachineTest.EventsOfOtherGenerationsAreIgnored~"
  "heartbeat-timeout-ignored~cxx~coordinator/job/state_machine.cc~s/if (timeout.count() > 0 && phase_ != JobPhase::kWaitingForAgents)/if (false \&\& timeout.count() > 0)/~JobRestartTest.SilentAgentIsLostAndTheJobWaitsForItToRejoin~"
  "ack-interval-off-by-one~cxx~coordinator/owner/heartbeat_sessions.cc~s/now - beating.last_ack >= beating.ack_every/now - beating.last_ack > beating.ack_every/~HeartbeatAckTest.AHeartbeatJustShortOfTheIntervalIsNotAcked~"
  "restart-before-old-generation-ended~cxx~coordinator/job/state_machine_endings.cc~s/  if (ranks_.live() > 0) return;/  if (ranks_.live() > 0 \&\& phase_ == JobPhase::kRunning) return;/~RestartTest.KilledWorkerRestartsTheJobWhichThenSucceeds~"
  "replacement-before-old-lease-nemesis~nemesis~coordinator/job/membership.cc~s/  return now >= machines_.ReplacementsAllowedAt();/  return true;/~--seed 1 --seconds 25 --window 8 --shapes spare --lease 4 --only freeze_past_lease::VIOLATION I1:~"
  "restart-before-old-generation-ended-nemesis~nemesis~coordinator/job/state_machine_endings.cc~s/  if (ranks_.live() > 0) return;/  if (ranks_.live() > 0 \&\& phase_ == JobPhase::kRunning) return;/~--seed 1 --seconds 20 --window 4 --only worker_crash::VIOLATION I7:~"
  "freeport-reservation-removed~cxx~tests/integration/subprocess.cc~/^bool ReservePort(int port) {/a\\  if (port > 0) return true;~FreePortTest.APortIsReservedAndOutsideTheEphemeralRange~"
  "fuzz-crash~fuzz~~~scripts/fuzz.sh~"
  "failures-agent-check~script~tests/multihost/failures.sh~s/grep -q \"disconnected\"/grep -q \"NOTdisconnected\"/~agent::FAIL: the coordinator did not notice~"
  "failures-coordinator-check~script~tests/multihost/failures.sh~s/grep -c 'end gen 0' \"\$run\/agent1.out\")\" = 2/grep -c 'end gen 0' \"\$run\/agent1.out\")\" = 3/~coordinator::FAIL: node02 kept its workers without a coordinator~"
  "cut-link-check~script~tests/multihost/cut_link_rejoin.sh~s/grep -q 'machine 1 is lost'/grep -q 'machine 9 is lost'/~::FAIL: the coordinator did not notice node02~"
  "udp-lost-check~script~tests/multihost/udp_lost.sh~s/^\[ \"\$(via 0)\" = udp \]/[ \"\$(via 0)\" = tcp ]/~::FAIL: node01's datagrams stopped too~"
  "elastic-restart-waits-for-all~cxx~coordinator/job/elastic_membership.cc~s/  if (restarting) return true;/  if (false) return true;/~ElasticMembershipTest.LossWithMinLeftGoesOnWithFewer~"
  "spare-before-old-lease~cxx~coordinator/job/membership_spares.cc~s|  // Its ranks are handed over only once the lost|  node.old_agent_may_run_until = TimePoint();  // Its ranks|~SparesTest.ASpareTakesALostMachinesPlaceAtOnceAndItsRanksAfterI1~"
  "cordon-never~cxx~coordinator/job/cordon_list.cc~s/  if (after_ <= 0 || host.empty()) return false;/  return false;/~SparesTest.AFlappingHostIsCordonedAndASpareTakesItsPlace~"
  "spare-pool-newest-first~cxx~coordinator/job/spare_pool.cc~s/spares_.rbegin(); it != spares_.rend()/spares_.begin(); it != spares_.end()/~SparesTest.SparesAreBoundedAndTakenInTheOrderTheyCame~"
  "unproven-cap-counts-proven~cxx~coordinator/access/connection_limits.cc~s/      if (protected_peers.count(c->peer)) continue;/      if (protected_peers.count(c->peer)) { kept_unprotected.push_back(c); continue; }/~ConnectionLimitsTest.ProvenConnectionsDoNotCountAgainstTheTotal~"
  "lease-end-cache-kept-on-loss~cxx~coordinator/job/machine_table.cc~/^void MachineTable::OldAgentMayRunUntil/,/^}/s/^  replacements_allowed_at_.reset();\$/  (void)0;/~SparesTest.ASpareTakesALostMachinesPlaceAtOnceAndItsRanksAfterI1~"
  "command-cursor-not-lowered~cxx~coordinator/job/machine_table.cc~s/    commands_checked_below_ = std::min(commands_checked_below_, m);/    (void)0;/~JobRestartTest.AMachineBackWithACommandToCheckHoldsTheNextGeneration~"
  "cond-var-on-the-wall-clock~cxx~common/monotonic_cond_var.h~s|    return condition_.wait_until(held, deadline, Checked(predicate));|    (void)held; return mutex->AwaitWithTimeout(absl::Condition(\&predicate), absl::FromChrono(deadline - std::chrono::steady_clock::now()));|~MonotonicWaitTest.AWaitTakesItsTimeWithTheWallClockAnHourBehind~"
  "datagrams-behind-the-queue~cxx~coordinator/owner/coordinator.cc~s|             /\*ahead=\*/true);|             /*ahead=*/false);|~CoordinatorQueueTest.HeartbeatDatagramsGoAheadOfQueuedMessages~"
  "ahead-lane-once-per-batch~cxx~coordinator/owner/coordinator.cc~s/^      RunAhead();\$/      (void)0;/~CoordinatorQueueTest.HeartbeatDatagramsGoAheadOfQueuedMessages~"
  "owner-never-ticks~cxx~coordinator/owner/coordinator.cc~s/  if (clock_() >= next_tick_) {/  if (false) {/~CoordinatorFakeClockTest.ATestMovesTheClockAndTheOwnerTicks~"
  "spare-stream-not-rekeyed~cxx~coordinator/owner/agent_table.cc~s/    registered_.at(stream) = handover->to;/    (void)0;/~SparesTest.ASpareTakesTheRanksOfAMachineWhoseAgentWasKilled~"
  "cordon-flapping-check~script~tests/multihost/cordon_flapping.sh~s/\[ \"\$bad_gens\" = \"0 1 \" \]/[ \"\$bad_gens\" = \"0 1 2 \" ]/~::FAIL: node02's workers ran in generations~"
  "elastic-check~script~tests/multihost/elastic_shrink_grow.sh~s/check_generation 1 4 2/check_generation 1 6 3/~::FAIL: generation 1 ranks were~"
  "ui-channel-keeper-removed~cxx~coordinator/cli/ui.cc~s/  const ChannelKeeper keeper(client->channel);//~UiTest.ACoordinatorThatIsGoneIs503UntilItComesBack~"
  "fence-not-published~cxx~agent/session/agent.cc~s/  core_.PublishFenceTo(GuardianFencePage());/  (void)0;/~FencingTest.AFrozenAgentsWorkersEndAtItsLeaseWithoutIt~"
  "guardian-ignores-fence~cxx~agent/cleanup/job_guardian.cc~s/    if (now_due \&\& \*now_due != fenced \&\& FencePage::BootNowNs() >= \*now_due) {/    if (false) {/~FencingTest.ASpareRunsAFrozenMachinesRanksOnlyOnceItsWorkersAreGone~"
  "previous-run-on-ignored~cxx~coordinator/job/membership.cc~s/  if (kept != previous_run_on_.end()) return kept->second;/  (void)kept;/~SparesTest.AfterACoordinatorRestartASpareWaitsForTheOldAgentsLease~"
  "fence-grace-not-shortening~cxx~agent/workers/worker_group.cc~s/    if (kill_at < kill_at_) {/    if (false) {/~WorkerGroupTest.AShorterGraceCutsTheRunningOneShort~"
  "own-end-ignored~cxx~agent/core/agent_core.cc~s/  if ((!connection_lost_ || own) \&\&/  if ((!connection_lost_) \&\&/~AgentCoreTest.AnExitFromBeforeTheStopReadAfterTheLossIsCarried~"
  "handover-spends-a-restart~cxx~coordinator/job/restart_budget.cc~s/  if (failure.spare_takes_over) {/  if (false) {/~SparesTest.AHandoverToASpareSpendsNoRestartEvenWithABudgetOfZero~"
  "lost-rank-exit-shown-as-zero~cxx~coordinator/status/job_status.cc~s/  return rank.state == RankState::kLost ? -1 : rank.exit.exit_code;/  return rank.exit.exit_code;/~JobStatusTest.AHandedOverMachinesOldRanksNameTheirHostAndNoExitCode~"
  "fenced-stop-renews-the-lease~cxx~agent/core/agent_core.cc~s/  if (!(message.has_stop() \&\& message.stop().fenced())) {/  if (true) {/~AgentCoreTest.AFencedStopKeepsNoLeaseAndAsksForTheFencesGrace~"
  "late-word-renews-from-its-reading~cxx~agent/core/agent_core.cc~s/      Vouched(\*sent);/      Vouched(now);/~AgentCoreTest.AWordReadLateKeepsTheLeaseOnlyFromWhenTheAgentWasHeard~"
  "late-ack-renews-from-its-reading~cxx~agent/link/heartbeat_sequence.cc~s/  return sent_\[acked_ % kSendsKept\];/  return std::chrono::steady_clock::now();/~HeartbeatSequenceTest.AnAckGivesWhenItsHeartbeatWasSent~"
  "start-after-the-lease~cxx~agent/core/agent_core.cc~s/  if (assignment.argv_size() > 0 \&\&/  if (false \&\& assignment.argv_size() > 0 \&\&/~AgentCoreTest.AnAssignmentReadAfterTheLeaseRanOutStartsNothing~"
  "cpu-idle-never-hung~cxx~agent/core/hang_watch.cc~s/    if (now - w.cpu_since >= settings_.cpu_timeout) {/    if (false) {/~HangWatchTest.AWorkerIdleForTheTimeoutIsHungAndOnlyIt~"
  "printing-is-not-life~cxx~agent/core/hang_watch.cc~s/    if (!w.cpu_at_since || printed || /    if (!w.cpu_at_since || /~HangWatchTest.AWorkerThatPrintsIsNotIdle~"
  "hang-said-without-where~cxx~agent/workers/worker_group_capture.cc~s/      absl::StrAppend(\&worker->hang_reason, \"; \", worker->stood_at);/      (void)0;/~HangTest.AWorkerAsleepIsFoundByItsIdleCpuAndSaysWhereItWas~"
  "lease-not-checked-before-the-start~cxx~agent/core/agent_core.cc~s/  if (generation == running_generation_ \&\&/  if (false \&\&/~AgentCoreTest.AnAssignmentReadAfterTheLeaseRanOutStartsNothing~"
  "disconnect-not-a-lost-event~cxx~coordinator/owner/core.cc~s/        journal_.TellLost(m);/        (void)0;/~EventsTest.AMachineWhoseConnectionDroppedIsALostEvent~"
  "handover-of-a-connected-machine~cxx~coordinator/job/state_machine_endings.cc~s/                             !node->connected \&\&/                             /~SparesTest.AMachineBackWithoutItsOutcomesIsNoHandover~"
  "log-resubscription-removed~cxx~coordinator/ports/log_relay.cc~s/    link->Send(client->Resubscription(machine));//~LogsRejoinTest.FollowGoesOnShowingAMachineWhoseAgentWasReplaced~"
  "metrics-without-machines~cxx~coordinator/status/routes.cc~s/status(MetricsRequest())/status(SummaryRequest())/~StatusPageTest.MetricsAskForTheMachinesAndCountsNotEveryRank~"
  "unhealthy-machine-gets-ranks~cxx~coordinator/job/membership.cc~s/      if (cordons_.Unhealthy(node.info.hostname)) return false;/      (void)node;/~NodeHealthTest.WithoutASpareAFixedSizeJobWaitsUntilTheHostIsHealthy~"
  "unhealthy-counted-ready~cxx~coordinator/job/membership.cc~s/  if (!cordons_.AnyUnhealthy()) return ready;/  return ready;/~NodeHealthTest.AnElasticJobWithFewerThanMinHealthyMachinesWaits~"
  "one-healthy-agent-clears-its-host~cxx~coordinator/job/membership.cc~s/  if (!problem.empty() || !cordons_.Unhealthy(host)) {/  if (true) {/~NodeHealthTest.AHostIsHealthyAgainOnlyOnceEveryAgentOfItIs~"
  "registration-without-health~cxx~agent/session/agent.cc~s/      registration.set_health_problem(ToValidUtf8(health.Latest()));/      (void)health;/~HealthCheckTest.AnUnhealthyMachineGetsNoRanksUntilItsCheckPasses~"
  "health-check-group-left-running~cxx~agent/health/node_health.cc~s/    kill(-pid, SIGKILL);  \/\/ the group: whatever it left behind/    kill(pid, SIGKILL);/~HealthCheckTest.ACheckThatLeavesAChildBehindEndsWhenItExits~"
  "no-stacks-before-a-failures-stop~cxx~agent/core/agent_core.cc~s/      effects.capture_stacks = stop.capture_stacks() \&\& !stop.fenced();/      effects.capture_stacks = false;/;s/        if (ours \&\& !stop.fenced()) {/        if (false) {/~HangTest.AFailureStopsEveryMachineOnlyOnceWhereItsRanksStoodIsKept~"
  "health-report-left-unswept~cxx~agent/cleanup/orphans.cc~s/ || IsExemptChild(child.pid)) continue;/) continue;/~HealthCheckTest.AHealthCheckRunningAtAGenerationsEndIsNotSwept~"
  "flight-recorder-never-asked~cxx~agent/workers/flight_recorder.cc~s/  request.asked = write(fd, \&byte, 1) == 1;/  request.asked = false;/~HangTest.TheFlightRecorderIsAskedForItsDumpBeforeTheKill~"
  "flight-recorder-writes-any-file~cxx~agent/workers/flight_recorder.cc~s/  if (fstat(at, \&st) != 0 || !S_ISFIFO(st.st_mode)) {/  if (fstat(at, \&st) != 0) {/~FlightRecorderTest.OnlyAFifoThatIsReadIsWritten~"
  "flight-recorder-follows-links~cxx~agent/workers/flight_recorder.cc~s/  const int at = open(paths.pipe.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);/  const int at = open(paths.pipe.c_str(), O_PATH | O_CLOEXEC);/~FlightRecorderTest.OnlyAFifoThatIsReadIsWritten~"
  "flight-recorder-takes-an-old-dump~cxx~agent/workers/flight_recorder.cc~s/    if (now.exists \&\& !(now == request.before) \&\& now.size > 0) {/    if (now.exists \&\& now.size > 0) {/~FlightRecorderTest.OnlyADumpWrittenAfterTheRequestCounts~"
  "stop-signals-during-a-capture~cxx~agent/workers/worker_group_capture.cc~s/          \[this\] { return !capturing_ || stopping_ || shutting_down_; });/          [this] { return true; });/~WorkerGroupTest.AStopWaitsForAHangsCaptureUnderWay~"
  "waiting-said-never~cxx~coordinator/owner/waiting_report.cc~s/  if (now < next_ || missing.empty()) return std::nullopt;/  return std::nullopt;/~LauncherTest.AWaitingCoordinatorSaysWhichMachineAndWhatToRunThere~"
  "sweep-ignores-network-namespace~cxx~agent/cleanup/stale_workers.cc~s/      if (NetworkNamespaceOf(std::to_string(pid)) != own_network) continue;/      (void)own_network;/~LauncherTest.AnAgentsSweepLeavesAnotherHostsProcessesAlone~"
  "same-agent-again-refused~cxx~coordinator/owner/core_agents.cc~s/  if (info.agent_pid <= 0 || holder.agent_pid != info.agent_pid ||/  if (true ||/~ReRegistrationTest.TheSameAgentAgainEndsItsOldStreamAndRejoins~"
  "hang-killed-before-the-stop~cxx~agent/workers/worker_group_capture.cc~s/  if (events_.hung) {/  if (false) {/~WorkerGroupTest.AHangReportedIsLeftForTheStopWhichKillsIt~"
  "stop-not-held-for-captures~cxx~coordinator/owner/core.cc~s/  if (machines.size() < 2 || !every_one_answers) {/  if (true) {/~TwoPhaseStopTest.AHangIsStoppedOnceEveryMachineHasCaptured~"
  "hung-exit-counted-as-stopped~cxx~coordinator/job/state_machine_endings.cc~s/  const bool hung = !rank->hung.empty();/  const bool hung = false;/~TwoPhaseStopTest.AHangIsStoppedOnceEveryMachineHasCaptured~"
  "spare-cut-off-not-awaited~cxx~coordinator/owner/core.cc~s/    if (spares_cut_ > 0) {/    if (false) {/~JobEndFarewellTest.ASpareCutOffBeforeTheEndIsAwaitedForItsLease~"
  "diagnose-without-where-ranks-stood~cxx~coordinator/record/diagnosis.cc~s/    } else if (event.kind() == \"stood\" || Heading(event.kind())) {/    } else if (Heading(event.kind())) {/~HangTest.DiagnoseSaysWhyAGenerationStoppedAndWhereTheOddRankStood~"
  "logs-follow-exits-0-whatever-the-job~cxx~coordinator/cli/logs.cc~s/    return job_end->exit_code();/    return 0;/~LogsTest.FollowMarksEachGenerationAndExitsWithTheJobsCode~"
  "awaited-machines-not-named~cxx~coordinator/status/job_status.cc~s/  if (machine.phase() == JobPhase::kWaitingForAgents) {/  if (false) {/~JobStatusTest.TheMachinesNotRegisteredAreNamedWhileTheJobWaits~"
  "agent-waits-in-silence~cxx~agent/session/agent.cc~s/      Log()->warn(\"{}\", line);/      (void)line;/~FirstRunTest.AnAgentSaysAgainAndAgainThatNothingListens~"
  "raw-handshake-noise~cxx~common/grpc_logging.cc~s/  if (!raw \&\& IsHandshakeFailureLine(line)) {/  if (false) {/~FirstRunTest.AWrongTokenIsNamedWithoutGrpcNoise~"
  "rank-lines-of-another-generation-kept~cxx~coordinator/job/state_machine.cc~s/FindRank(machine_rank, generation, rank - node->rank_offset)/FindRank(machine_rank, generation_, rank - node->rank_offset)/~JobStatusTest.EachRanksNewestLineIsShownWithItsAge~"
  "progress-never-reported~cxx~agent/session/agent_session_output.cc~s/  return output->lines_size() > 0;/  return false;/~FirstRunTest.PsShowsEachRanksNewestLine~"
  "coordinator-log-dir-not-sent~cxx~coordinator/owner/generation_assignment.cc~s/  assignment->set_log_dir(options.log_dir);/  assignment->set_log_dir(std::string());/~LauncherTest.PerRankLogFilesOfEveryMachine~"
  "failure-names-no-program~cxx~agent/session/agent_session_workers.cc~s/  exited.set_executable(ToValidUtf8(executable));/  exited.set_executable(std::string());/~LauncherTest.FailingWorkerEndsTheJobWithItsExitCode~"
  "machine-output-age-never-set~cxx~coordinator/job/state_machine.cc~s/    node->last_output_at = at;/    node->last_output_at = std::nullopt;/~JobStatusTest.EachRanksNewestLineIsShownWithItsAge~"
  "agent-command-not-explained~cxx~agent/agent_main.cc~s/  app.allow_extras();/  app.allow_extras(false);/~FirstRunTest.AnAgentGivenTheScriptSaysTheCoordinatorSendsIt~"
  "torch-allreduce-check~script~tests/multihost/two_hosts_torch_allreduce.sh~s/allreduce ok: rank \$rank\/4\" \"\$work\/coord.out\"/allreduce ok: rank \$rank\/5\" \"\$work\/coord.out\"/~::FAIL: rank 0 did not report a correct all-reduce~"
  "listen-port-ephemeral~cxx~common/network.cc~s/  if (ports) {/  if (false) {/~ListenPortRangeTest.AFreePortIsBelowThisMachinesEphemeralRange~"
  "first-run-hosts-check~script~tests/multihost/first_run_across_hosts.sh~s/(created now). Every machine of this job/(created now).  Every machine of this job/~::FAIL: start did not say where the token is~"
  "demo-train-check~script~tests/multihost/two_hosts_demo_train.sh~s/grep -q \"effective batch size 32 = /grep -q \"effective batch size 33 = /~::FAIL: hosts2x2x8: the coordinator did not name the effective batch size~slow"
  "slurm-run-sleeper-check~script~tests/multihost/slurm.sh~s/grep -qx 4/grep -qx 5/~::FAIL: notice never ran 4 ranks~slow"
)

if [ $list = 1 ]; then
  for m in "${mutants[@]}"; do echo "${m%%~*}"; done
  exit 0
fi

selected=()
for m in "${mutants[@]}"; do
  IFS='~' read -r name kind file expr test slow <<<"$m"
  if [ ${#only[@]} -gt 0 ]; then
    printf '%s\n' "${only[@]}" | grep -qxF "$name" && selected+=("$m")
  elif [ $quick = 0 ] || [ "$slow" != slow ]; then
    selected+=("$m")
  fi
done
[ ${#selected[@]} -gt 0 ] || { echo "no such mutant: ${only[*]}"; exit 2; }

dir=$root/build-mutants
tree=$dir/tree
logs=$dir/logs
rm -rf "$tree" "$logs"
mkdir -p "$tree" "$logs"
(cd "$root" && git ls-files -z | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
  tar -xf - -C "$tree"
echo "== building the copy in $tree/build"
cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$logs/cmake.log" 2>&1 \
  && cmake --build "$tree/build" -j2 >"$logs/build.log" 2>&1 \
  || { echo "FAIL: the unchanged copy does not build (see $logs/build.log)"; exit 1; }

# A cxx mutant builds only the test binary that holds its test (and what
# that binary depends on: the integration tests, the daemons they start),
# not every program: about 2 s less per build. TESTS_IN[binary target]:
# its tests, one "Suite.Name" per line.
declare -A tests_in=()
for binary in unit/trl_unit_tests integration/trl_integration_tests; do
  tests_in[${binary#*/}]=$("$tree/build/tests/$binary" --gtest_list_tests 2>/dev/null |
    awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}')
done
target_of() {
  local target
  for target in "${!tests_in[@]}"; do
    grep -qxF "$1" <<<"${tests_in[$target]}" && { echo "--target $target"; return; }
  done
}

# Baseline: every test a cxx mutant relies on passes on the unchanged copy
# (a test that always fails would "catch" anything).
baseline=()
for m in "${selected[@]}"; do
  IFS='~' read -r name kind file expr test slow <<<"$m"
  [ "$kind" = cxx ] && baseline+=("$test")
done
kept=()
for m in "${selected[@]}"; do
  IFS='~' read -r name kind file expr test slow <<<"$m"
  if [ "$kind" = nemesis ]; then
    # The same run on the unchanged copy passes (else it would "catch"
    # anything). Without root it skips (77): so does the mutant, saying so
    # (under CI=true the nemesis fails instead, and so does this).
    echo "== baseline: nemesis.sh ${test%%::*} on the unchanged copy"
    # shellcheck disable=SC2086
    timeout 300 bash "$tree/tests/nemesis/nemesis.sh" "$tree/build" ${test%%::*} \
      >"$logs/baseline-$name.log" 2>&1
    rc=$?
    if [ $rc = 77 ]; then
      echo "SKIP: $name: $(tail -1 "$logs/baseline-$name.log")"
      continue
    fi
    [ $rc = 0 ] || { echo "FAIL: nemesis.sh ${test%%::*} fails without any mutant (see $logs/baseline-$name.log)"; exit 1; }
  fi
  kept+=("$m")
done
selected=("${kept[@]}")
if [ ${#baseline[@]} -gt 0 ]; then
  regex="^($(IFS='|'; echo "${baseline[*]}"))\$"
  echo "== baseline: ${#baseline[@]} tests on the unchanged copy"
  (cd "$tree/build" && ctest -R "$regex" --timeout 120 -j2) >"$logs/baseline.log" 2>&1 \
    || { echo "FAIL: a test fails without any mutant (see $logs/baseline.log)"; exit 1; }
  ran=$(grep -c "Test *#.*Passed" "$logs/baseline.log")
  [ "$ran" = "$(printf '%s\n' "${baseline[@]}" | sort -u | wc -l)" ] \
    || { echo "FAIL: baseline ran $ran tests, not all of ${baseline[*]}"; exit 1; }
fi

survived=0
results=()
for m in "${selected[@]}"; do
  IFS='~' read -r name kind file expr test slow <<<"$m"
  log="$logs/$name.log"
  start=$(date +%s)
  verdict=""
  if [ -n "$file" ]; then
    sed -i -e "$expr" "$tree/$file"
    if cmp -s "$root/$file" "$tree/$file"; then
      verdict="DID NOT APPLY (sed changed nothing in $file)"
    fi
  fi
  if [ -z "$verdict" ]; then
    case $kind in
      cxx)
        # shellcheck disable=SC2046
        if ! cmake --build "$tree/build" -j2 $(target_of "$test") >"$log" 2>&1; then
          verdict="DOES NOT BUILD (see $log)"
        elif (cd "$tree/build" && ctest -R "^${test}\$" --timeout 120 --output-on-failure) >>"$log" 2>&1; then
          verdict="NOT CAUGHT by $test"
        elif grep -q "Test *#.*${test} .*\*\*\*\(Failed\|Timeout\|Exception\)" "$log"; then
          verdict="caught by $test"
        else
          verdict="NOT CAUGHT: $test did not run (see $log)"
        fi
        ;;
      script)
        args=${test%%::*} expected=${test#*::}
        # The binaries as the sources are: a C++ mutant before this one was
        # put back in the source but is still built in.
        # shellcheck disable=SC2086
        # As under ctest: a HOME and TMPDIR of its own (tests/hermetic.cmake).
        rm -rf "$dir/scratch"; mkdir -p "$dir/scratch/home" "$dir/scratch/tmp"
        if ! cmake --build "$tree/build" -j2 >"$log" 2>&1; then
          verdict="DOES NOT BUILD (see $log)"
        elif HOME="$dir/scratch/home" TMPDIR="$dir/scratch/tmp" \
           timeout 400 bash "$tree/$file" "$tree/build" $args >>"$log" 2>&1; then
          verdict="NOT CAUGHT by $file"
        elif grep -qF "$expected" "$log"; then
          verdict="caught by $file ($expected)"
        else
          verdict="NOT CAUGHT: $file failed, but not with '$expected' (see $log)"
        fi
        ;;
      nemesis)
        args=${test%%::*} expected=${test#*::}
        if ! cmake --build "$tree/build" -j2 >"$log" 2>&1; then
          verdict="DOES NOT BUILD (see $log)"
        # shellcheck disable=SC2086
        elif timeout 300 bash "$tree/tests/nemesis/nemesis.sh" "$tree/build" $args >>"$log" 2>&1; then
          verdict="NOT CAUGHT by nemesis.sh $args"
        elif grep -qF "$expected" "$log"; then
          verdict="caught by nemesis.sh $args ($(grep -m1 -F "$expected" "$log" | sed 's/^ *//' | cut -c1-240))"
        else
          verdict="NOT CAUGHT: nemesis.sh failed, but not with '$expected' (see $log)"
        fi
        ;;
      fuzz)
        if FUZZ_BUILD_DIR="$tree/build-fuzz" FUZZ_TARGETS=config \
           FUZZ_CMAKE_ARGS=-DTRL_FUZZ_SELFTEST_CRASH=ON \
           bash "$tree/scripts/fuzz.sh" 5 >"$log" 2>&1; then
          verdict="NOT CAUGHT by scripts/fuzz.sh"
        elif grep -q "FAIL: fuzzer config exited" "$log"; then
          verdict="caught by scripts/fuzz.sh"
        else
          verdict="NOT CAUGHT: scripts/fuzz.sh failed otherwise (see $log)"
        fi
        ;;
    esac
  fi
  [ -n "$file" ] && cp "$root/$file" "$tree/$file"
  case $verdict in caught*) ;; *) survived=$((survived + 1)) ;; esac
  line=$(printf '%-38s -> %s (%ss)' "$name" "$verdict" $(($(date +%s) - start)))
  echo "$line"
  results+=("$line")
done
# The copy is left as it was: rebuild what the last mutant touched.
cmake --build "$tree/build" -j2 >/dev/null 2>&1

echo "== mutants"
printf '%s\n' "${results[@]}"
if [ $survived -gt 0 ]; then
  echo "FAIL: $survived of ${#selected[@]} mutants not caught"
  exit 1
fi
echo "all ${#selected[@]} mutants caught"
