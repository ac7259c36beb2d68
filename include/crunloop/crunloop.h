/*
 * crunloop.h — the umbrella header of CRunLoop.
 *
 * CRunLoop is Apple's threading toolkit (CoreFoundation's run loop, threads,
 * perform requests, locks, conditions and atomics) for Linux, mirroring
 * CoreFoundation name for name with the RL prefix. See README.md and
 * docs/ for what it does better than the run loop shipped with Swift on Linux.
 */
#ifndef CRUNLOOP_CRUNLOOP_H
#define CRUNLOOP_CRUNLOOP_H

#include <crunloop/RLBase.h>
#include <crunloop/RLError.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>
#include <crunloop/RLArray.h>
#include <crunloop/RLThread.h>
#include <crunloop/RLPerform.h>
#include <crunloop/RLWorkerThread.h>
#include <crunloop/RLLock.h>
#include <crunloop/RLCondition.h>
#include <crunloop/RLConditionLock.h>
#include <crunloop/RLReadWriteLock.h>
#include <crunloop/RLOnce.h>
#include <crunloop/RLAtomic.h>
#include <crunloop/RLSpinLock.h>
#include <crunloop/RLSync.h>
#include <crunloop/RLDistributedLock.h>
#include <crunloop/RLData.h>
#include <crunloop/RLString.h>
#include <crunloop/RLNumber.h>
#include <crunloop/RLMessagePort.h>
#include <crunloop/RLSocket.h>
#include <crunloop/RLSignalSource.h>
#include <crunloop/RLPort.h>
#include <crunloop/RLSocketPort.h>
#include <crunloop/RLLockDebug.h>
#include <crunloop/RLURL.h>
#include <crunloop/RLStream.h>

#endif /* CRUNLOOP_CRUNLOOP_H */
