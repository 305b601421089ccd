"""CPU model actor for NDIF 0.1.2, plugged in with ``NDIF_MODEL_IMPORT_PATH=ndif_cpu.CPUModelActor`` (start.sh).

The stock actor places the weights with ``torch.cuda`` and refuses tensors on the CPU; this subclass
loads the model on the CPU and makes the actor's ``torch.cuda`` bookkeeping calls no-ops. NDIF itself
is not edited. Runs inside the NDIF venv (.venv-ndif), imported by the Ray workers (PYTHONPATH).
"""

import ray
import torch
from ndif.services.ray.deployments.modeling.base import BaseModelDeployment
from nnsight.modeling.huggingface import HuggingFaceModel

if not torch.cuda.is_available():
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.empty_cache = lambda *a, **k: None


class CPUModelDeployment(BaseModelDeployment):
    def load_from_disk(self):
        model = HuggingFaceModel.from_model_key(self.model_key, dispatch=True, dtype=self.dtype_name, **self.kwargs)
        model._module.requires_grad_(False)
        return model

    async def to_cache(self):  # no GPU to evict from: a preempted model just stops
        await self.cancel("preempted")
        self.cached = True

    def from_cache(self, gpu_mem_bytes_by_id):
        self.gpu_mem_bytes_by_id = gpu_mem_bytes_by_id
        self.cached = False


@ray.remote(num_cpus=1, max_restarts=-1)
class CPUModelActor(CPUModelDeployment):
    pass
