# PRIV, positive control: the runtime the code needs still works: asyncio's
# call_soon_threadsafe and run_in_executor, threads, a pool, a subprocess.
import asyncio
import concurrent.futures
import threading

loop = asyncio.get_running_loop()
done = loop.create_future()
threading.Thread(target=lambda: loop.call_soon_threadsafe(done.set_result, 7)).start()
from_thread = await asyncio.wait_for(done, 10)
in_executor = await loop.run_in_executor(None, sum, range(10))
with concurrent.futures.ThreadPoolExecutor(8) as pool:
    pooled = sorted(pool.map(lambda x: x * x, range(8)))
ok = from_thread == 7 and in_executor == 45 and pooled[-1] == 49 and control_subprocess() == "ok"
report("allowed" if ok else "denied", None, control=check("asyncio, threads, subprocess", ok))
