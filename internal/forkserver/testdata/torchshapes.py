# A tiny real torch loop over a DataLoader whose batches grow in length
# (dynamic padding), the longest last: the adapter serves the longest first
# and reports each step's batch shape.
import torch

lengths = [3, 4, 5, 6, 7, 8, 20, 20]


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return len(lengths)

    def __getitem__(self, i):
        return list(range(lengths[i]))


def pad(items):
    longest = max(len(x) for x in items)
    return torch.tensor([x + [0] * (longest - len(x)) for x in items], dtype=torch.float)


model = torch.nn.Linear(1, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, batch in enumerate(torch.utils.data.DataLoader(Tokens(), batch_size=2, collate_fn=pad)):
    loss = model(batch.unsqueeze(-1)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step", step, "length", batch.shape[1], flush=True)
